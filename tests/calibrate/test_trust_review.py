"""Ways round the chain of trust found in review (issue 45): each test plants one and must see it refused."""

from __future__ import annotations

import shutil

import pytest
from drift_lines import repeat
from written_repeats import ARM, write_repeat

from harness.config.errors import ConfigError
from harness.records.manifest import CalibrationRepeat
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


def test_a_foreign_run_among_the_repeat_directories_is_refused_before_any_repeat_runs(store, tmp_path):
    """reports/<id>-r3 holds another run: refused before repeats 1 and 2 run (hours on a GPU), not after."""
    from harness.calibrate.command import calibrate

    write_repeat(tmp_path / "reports" / "cal-r3", store, repeat(3), calibration=CalibrationRepeat(id="x", repeat=1,
                                                                                                    of=3))
    with pytest.raises(ConfigError, match="holds a run that is not repeat 3 of 3 of this calibration"):
        calibrate(ARM, 3, ["teacher_forcing"], [], lambda argv, env: pytest.fail("a repeat ran"), "cal")
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["cal-r3"]

