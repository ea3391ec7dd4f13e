"""The project's 12 real clean CPU nights (docs/evidence/cpu-history-2026-12-04/history.sqlite: nights 05, 06, 11 and
12 with buffered c1 streams, TPOT p50 0.018 ms) replayed night by night through `history check`'s judgement: no night
fails (the CPU pair's timing is not enforced; correctness repeats bit-exactly). The same records with a correctness
step planted from night 9 fail at night 10, the step's second night (a bit-exact series: two runs make a level)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from harness.history import store
from harness.history.trends import nightly

REAL = Path(__file__).parents[2] / "docs" / "evidence" / "cpu-history-2026-12-04" / "history.sqlite"


def verdicts(path: Path) -> dict[str, str]:
    with store.connect(path) as db:
        out = {}
        for r in store.runs(db):
            v = nightly(db, r.run_id)
            out[r.run_id] = "FAIL" if v.failures else ("PASS" if v.passed else "NOT JUDGED")
    return out


@pytest.fixture
def real(tmp_path) -> Path:
    copy = tmp_path / "history.sqlite"
    shutil.copy(REAL, copy)  # opening migrates the file: never the evidence itself
    return copy


def test_the_real_clean_nights_never_fail(real):
    got = verdicts(real)
    assert len(got) == 12 and "FAIL" not in got.values(), got
    assert [got[f"night-{n:02d}"] for n in range(1, 6)] == ["NOT JUDGED"] * 5  # 5 runs: not enough history
    assert [got[f"night-{n:02d}"] for n in range(6, 13)] == ["PASS"] * 7


@pytest.mark.parametrize("metric,move", [("check.graph_replay.max_drift", 0.01),
                                         ("check.long_prefix_outputs.exact_rate", -1 / 14)])
def test_a_correctness_step_planted_in_the_real_records_fails_at_its_second_night(real, metric, move):
    db = sqlite3.connect(real)
    for (key,) in db.execute("SELECT run_key FROM runs WHERE run_id >= 'night-09'").fetchall():
        db.execute("UPDATE metrics SET value = value + ? WHERE run_key = ? AND metric = ?", (move, key, metric))
    db.commit()
    db.close()
    got = verdicts(real)
    assert [got[f"night-{n:02d}"] for n in range(6, 13)] == ["PASS"] * 4 + ["FAIL"] * 3, got
