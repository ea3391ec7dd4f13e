"""pytest arguments given after `--` to qualify, checked as pytest parses them before anything is written: a
refused option leaves no empty run directory."""

from __future__ import annotations

from harness.config.errors import ConfigError
from harness.config.suites import SUITES_DIR


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
