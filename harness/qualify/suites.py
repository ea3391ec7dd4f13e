"""The run-suites step: pytest on the run's suite files with the plugin's options; pytest arguments after `--`
checked before anything is written."""

from __future__ import annotations

from harness.config.errors import ConfigError
from harness.config.suites import SUITES_DIR
from harness.qualify import interrupts
from harness.qualify.request import AdmittedRun


def pytest_argv(run: AdmittedRun) -> list[str]:
    """The suites' pytest command line: the run's suite files (the default leaves the named-only ones out), its arms,
    run directory and options, then the pytest arguments given after `--`."""
    request, run_dir = run.request, run.run_dir
    targets = [str(SUITES_DIR / f"test_{s}.py") for s in run.suites]
    named = ["--arm", run.names[0]] if len(run.names) == 1 else ["--arms", ",".join(run.names)]
    argv = [*targets, "-p", "no:cacheprovider", *named, "--run-dir", str(run_dir),
            f"--junitxml={run_dir / 'junit.xml'}", "-o", "junit_family=xunit2", "-rfE"]
    if run.reference:
        argv += ["--reference", run.reference]
    for assignment in request.overrides:
        argv += ["--set", assignment]
    if request.refresh_reference:
        argv.append("--refresh-reference")
    if request.resume:
        argv.append("--resume")
    if request.parallel:  # one xdist worker per arm of the run: candidates and references side by side
        argv += ["-n", str(run.arm_count), "--parallel-arms"]
    return argv + list(request.pytest_args)


def run_suites(run: AdmittedRun) -> int:
    """pytest's exit code for the run's suites, in this process (its plugin reads run.json record_run wrote)."""
    import pytest

    return int(pytest.main(pytest_argv(run), plugins=[interrupts.RELAY]))


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
