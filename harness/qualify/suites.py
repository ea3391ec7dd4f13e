"""The run-suites step: pytest on the run's suite files, in this process, with the run handed over as a value (a
plugin object: harness/pytest_plugin/started_run.py finds it); pytest arguments after `--` checked before anything
is written. pytest's argv carries pytest's own options alone, never the run."""

from __future__ import annotations

from harness.config.errors import ConfigError
from harness.config.suites import SUITES_DIR
from harness.qualify import interrupts
from harness.qualify.request import AdmittedRun
from harness.records.manifest import RunManifest
from harness.records.started_run import StartedRun


def started_run(run: AdmittedRun, manifest: RunManifest) -> StartedRun:
    """The value the suites run: the admitted arms and pairs, run.json as record_run wrote it, and this attempt's
    flags (the one place a qualify run and a by-hand pytest run both build it)."""
    request = run.request
    return StartedRun(run.run_dir, manifest, dict(run.arms.loaded), run.arms.arm_set, parallel=request.parallel,
                      resume=request.resume is not None, refresh_reference=request.refresh_reference)


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


def check_pytest_args(extra: list[str]) -> None:
    """The pytest arguments after `--` are ones pytest accepts: parsed as pytest.main's first step does (plugins and
    the root conftest loaded, nothing collected or run), before the run directory exists; a ConfigError otherwise."""
    if not extra:
        return
    from _pytest.config import _prepareconfig  # pytest.main's own parse step; no public equivalent
    from _pytest.config.exceptions import UsageError

    try:
        config = _prepareconfig([str(SUITES_DIR), "-p", "no:cacheprovider", *extra])
    except UsageError as exc:
        why = next((ln.split("error: ", 1)[1] for ln in str(exc).splitlines() if "error: " in ln), str(exc))
        raise ConfigError(f"pytest arguments after --: {' '.join(extra)}: pytest refuses them ({why}); nothing was "
                          "started: drop them, or see `python -m pytest --help`") from None
    config._ensure_unconfigure()
