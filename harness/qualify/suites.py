"""The run-suites step: pytest on the run's suite files, in this process, with the run handed over as a value (a
plugin object: harness/pytest_plugin/started_run.py finds it). pytest's argv carries pytest's own options alone,
never the run."""

from __future__ import annotations

from harness.config.suites import SUITES_DIR
from harness.qualify import interrupts
from harness.records.started_run import StartedRun


def pytest_argv(run: StartedRun, *pytest_args: str) -> list[str]:
    """The suites' pytest command line: the run's suite files as run.json recorded them (the default leaves the
    named-only ones out), JUnit and report options, one xdist worker per arm of a parallel run, then the pytest
    arguments given after `--`."""
    targets = [str(SUITES_DIR / f"test_{s}.py") for s in run.manifest.suites or []]
    argv = [*targets, "-p", "no:cacheprovider", f"--junitxml={run.run_dir / 'junit.xml'}", "-o",
            "junit_family=xunit2", "-rfE"]
    if run.parallel:  # candidates and references side by side
        argv += ["-n", str(len(run.arm_set.arms))]
    return argv + list(pytest_args)


def run_suites(run: StartedRun, *pytest_args: str) -> int:
    """pytest's exit code for the run's suites, in this process: the plugin's session is built from `run`."""
    import pytest

    return int(pytest.main(pytest_argv(run, *pytest_args), plugins=[interrupts.RELAY, run]))
