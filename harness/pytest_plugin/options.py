"""The plugin's command-line options, turned into one plain Options value (not read option by option)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

DEFAULT_ARM = "cpu-smoke"


@dataclass
class Options:
    arm: str = DEFAULT_ARM
    arms: list[str] = field(default_factory=list)  # --arms: several candidates in one run (else `arm` alone)
    reference: str | None = None  # default: the arm's own `reference:`
    run_dir: Path | None = None
    overrides: list[str] = field(default_factory=list)  # --set: candidates; ARM:PATH=VALUE that arm alone
    refresh_reference: bool = False  # capture reference outputs anew even when the store has them
    resume: bool = False  # run only the tests without an outcome in the run directory's results file
    parallel: bool = False  # one xdist worker per arm (harness.pytest_plugin.parallel)

    @property
    def named(self) -> list[str]:
        """The arms named as candidates: --arms, else --arm."""
        return self.arms or [self.arm]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "DCP qualification harness")
    group.addoption("--arm", default=DEFAULT_ARM, help="candidate arm (configs/arms/<name>.yaml)")
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


def options_from(config: pytest.Config) -> Options:
    arms = config.getoption("--arms")
    return Options(arm=config.getoption("--arm"), arms=[a.strip() for a in arms.split(",")] if arms else [],
                   reference=config.getoption("--reference"),
                   run_dir=config.getoption("--run-dir"), overrides=list(config.getoption("harness_set")),
                   refresh_reference=config.getoption("--refresh-reference"), resume=config.getoption("--resume"),
                   parallel=config.getoption("--parallel-arms"))
