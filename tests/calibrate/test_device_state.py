"""State that survives the device machine (issue 56 item 2): a calibration's repeats made in two device sessions
combine. Session 1 writes a repeat under its kept directory and save_state (scripts/device_lib.sh, run for real in
bash) packs it into $OUT; the archive is taken into a fresh session's .device-refs/ (scripts/device_state.sh), where
device_keep restores it; session 2 adds a repeat after a docs commit (another git commit, the same harness_hash), and
`calibrate --from-runs` over both stores the calibration. A repeat whose measuring code differs is refused."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from drift_lines import repeat
from written_repeats import write_repeat

from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT
from harness.records.manifest import read_manifest, write_manifest
from harness.records.runinfo import harness_hash

LIB = REPO_ROOT / "scripts" / "device_lib.sh"
TAKE = REPO_ROOT / "scripts" / "device_state.sh"


def session(root: Path, body: str) -> subprocess.CompletedProcess:
    """One device call on a CPU machine: the library sourced in `root` (its .device-refs/ is what was carried)."""
    script = f"set -euo pipefail\nsource {LIB}\ndevice_start\ndevice_keep \"$PWD/keep\"\n{body}\n"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root), "OUT": str(root / "out"), "HSITE": str(root / "hsite")}
    root.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, check=False)


def stamped(run_dir: Path, code: str, commit: str) -> Path:
    """The repeat's run.json with the harness hash and commit qualify would have recorded."""
    m = read_manifest(run_dir)
    write_manifest(run_dir, m.model_copy(update={"harness_hash": code, "git_commit": commit}))
    return run_dir


def two_sessions(tmp_path: Path, store: Path, second_code: str) -> list[Path]:
    """Repeat 1 in session 1, saved and taken back; repeat 2 in a fresh session 2: both run dirs as session 2 has
    them."""
    code = harness_hash()
    s1, s2 = tmp_path / "s1", tmp_path / "s2"
    stamped(write_repeat(s1 / "keep" / "reports" / "cal-x-r1", store, repeat(1)), code, "c0ffee")
    first = session(s1, "save_state")
    assert first.returncode == 0, first.stderr
    assert "save_state: state.tgz" in first.stdout
    s2.mkdir()
    took = subprocess.run(["bash", str(TAKE), "take", str(s1 / "out")], cwd=s2, capture_output=True, text=True,
                          check=False)
    assert took.returncode == 0, took.stderr
    shutil.rmtree(s1)  # the machine went back: nothing of session 1 is left but what came back
    second = session(s2, "ls keep/reports")
    assert second.returncode == 0, second.stderr
    assert "restored .device-refs/state.tgz" in second.stdout and "cal-x-r1" in second.stdout
    r2 = stamped(write_repeat(s2 / "keep" / "reports" / "cal-x-r2", store, repeat(2)), second_code, "d0c5")
    return [s2 / "keep" / "reports" / "cal-x-r1", r2]


def test_repeats_of_two_sessions_combine_across_a_docs_commit(store, tmp_path):
    from harness.calibrate.command import store_calibration

    runs = two_sessions(tmp_path, store, harness_hash())
    assert store_calibration("cpu-smoke", "cal-x", runs) == 0
    assert (store / "teacher_forcing.calibration.json").is_file()


def test_a_repeat_of_other_measuring_code_is_refused(store, tmp_path):
    from harness.calibrate.command import store_calibration

    runs = two_sessions(tmp_path, store, "0123456789abcdef")
    with pytest.raises(ConfigError, match="different measuring/judging code .*cal-x-r2: 0123456789abcdef"):
        store_calibration("cpu-smoke", "cal-x", runs)
    assert not (store / "teacher_forcing.calibration.json").exists()


def test_the_harness_hash_ignores_docs_and_moves_with_a_judging_file(tmp_path):
    for rel, text in (("harness/judge/limits.py", "LIMIT = 1\n"), ("docs/gates.md", "# gates\n"),
                      ("configs/gates.yaml", "a: 1\n"), ("harness/report/page.py", "X = 1\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    before = harness_hash(tmp_path)
    (tmp_path / "docs/gates.md").write_text("# gates, reworded\n")
    (tmp_path / "harness/report/page.py").write_text("X = 2\n")
    assert harness_hash(tmp_path) == before
    (tmp_path / "harness/judge/limits.py").write_text("LIMIT = 2\n")
    assert harness_hash(tmp_path) != before


def test_the_harness_hash_ignores_comments_and_docstrings_of_measuring_files_not_their_code(tmp_path):
    judging, gates = tmp_path / "harness/judge/limits.py", tmp_path / "configs/gates.yaml"
    judging.parent.mkdir(parents=True)
    gates.parent.mkdir(parents=True)
    judging.write_text('"""Limits."""\n\ndef limit():\n    """The limit, in nats."""\n    return 1  # why: measured\n')
    gates.write_text("a: 1  # the seed limit\n")
    before = harness_hash(tmp_path)
    judging.write_text('"""Limits, reworded."""\n\n\ndef limit():\n    """Nats."""\n    return 1\n')
    gates.write_text("# gates\na: 1\n")
    assert harness_hash(tmp_path) == before
    for planted in (judging.read_text().replace("return 1", "return 2"), 'def limit():\n    return 1\n\nX = "a"\n'):
        judging.write_text(planted)
        assert harness_hash(tmp_path) != before, planted
    judging.write_text('"""Limits."""\n\ndef limit():\n    """The limit, in nats."""\n    return 1\n')
    gates.write_text("a: 2\n")
    assert harness_hash(tmp_path) != before
