"""Ways round the chain of trust found in review (issue 45): each test plants one and must see it refused."""

from __future__ import annotations

import shutil

import pytest
from drift_lines import repeat
from written_repeats import ARM, write_repeat

from harness.config.errors import ConfigError
from harness.refcheck.floor_store import load_calibration


def test_a_copied_run_is_the_same_run_not_a_second_repeat(store, tmp_path):
    """One run copied to another directory (cp -r) is still one run: K = 2 from it would be zero spread, exactly
    what `--from-runs` given the same run twice is refused for."""
    from harness.calibrate.command import store_calibration

    one = write_repeat(tmp_path / "reports" / "cal-r1", store, repeat(1))
    copy = tmp_path / "reports" / "cal-r2"
    shutil.copytree(one, copy)
    with pytest.raises(ConfigError, match="are the same run"):
        store_calibration(ARM, "cal", [one, copy])
    assert load_calibration(store, "teacher_forcing") is None and not (tmp_path / "reports" / "cal").exists()

