"""The plugin's command-line options, for pytest run by hand (`pytest suites/... --arm X`): one QualifyRequest, which
admission turns into the run as qualify would (harness/pytest_plugin/started_run.py). qualify itself passes none of
them: it hands its run to pytest as a value."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.admission.request import QualifyRequest
from harness.config.suites import BY_NAME

DEFAULT_ARM = "cpu-smoke"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "DCP qualification harness (pytest run by hand; qualify passes none)")
    group.addoption("--arm", default=None, help=f"candidate arm (configs/arms/<name>.yaml; default {DEFAULT_ARM})")
    group.addoption("--arms", default=None, help="several candidate arms in one run, comma-separated (each against "
                    "its own `reference:`; a shared reference runs once)")
    group.addoption("--reference", default=None, help="reference arm (default: the arm's `reference:`)")
    group.addoption("--run-dir", default=None, type=Path, help="run directory (default reports/<timestamp>)")
    group.addoption("--set", dest="harness_set", action="append", default=[], metavar="PATH=VALUE",
                    help="override a field of the candidate arm(s), e.g. --set parallelism.dcp=4")
    group.addoption("--refresh-reference", action="store_true", default=False,
                    help="capture the reference arm's outputs anew instead of reusing the reference store")
    group.addoption("--resume", action="store_true", default=False,
                    help="continue the run in --run-dir: only tests without a recorded outcome run, as a new attempt")
    group.addoption("--parallel-arms", action="store_true", default=False,
                    help="with -n N: each arm's tests in one xdist worker, GPU servers on leased GPUs")


def request_from(config: pytest.Config) -> QualifyRequest:
    """The by-hand options as the request qualify would have made of them: --resume continues the run in --run-dir
    (its own arms unless named), else a new run in --run-dir; the suites are the suite files named, where each
    argument names one (else qualify's default)."""
    arm, arms, run_dir = config.getoption("--arm"), config.getoption("--arms"), config.getoption("--run-dir")
    resume = config.getoption("--resume")
    if resume and run_dir is None:
        raise pytest.UsageError("--resume continues the run in --run-dir: name its directory")
    if not (arm or arms or resume):
        arm = DEFAULT_ARM
    return QualifyRequest(arm=arm, arms=arms, reference=config.getoption("--reference"),
                          run_dir=None if resume or run_dir is None else str(run_dir),
                          resume=str(run_dir) if resume else None, suites=named_suites(config),
                          parallel=config.getoption("--parallel-arms"),
                          refresh_reference=config.getoption("--refresh-reference"),
                          overrides=tuple(config.getoption("harness_set")),
                          argv=("pytest", *config.invocation_params.args))


def named_suites(config: pytest.Config) -> str | None:
    """The suites the arguments name (suites/test_<suite>.py each), comma-separated; None where an argument names no
    one suite file (a directory: qualify's default suites)."""
    names = [Path(arg.split("::")[0]).stem.removeprefix("test_") for arg in config.args]
    if not names or not all(n in BY_NAME and Path(arg.split("::")[0]).parent.name == "suites"
                            for n, arg in zip(names, config.args, strict=True)):
        return None
    return ",".join(dict.fromkeys(names))


def names_suites(config: pytest.Config) -> bool:
    """The session runs suites: an argument names a directory called `suites` or a file in one (the rule the hooks
    use for a suite test: its file's directory is named `suites`). Only such a session is a run."""
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if (path.name == "suites" and path.is_dir()) or path.parent.name == "suites":
            return True
    return False
