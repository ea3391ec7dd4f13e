"""The mutation table against vLLM 0.25.0's source, apply/restore round trips, and the kill-matrix builder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.faults import kill_matrix as km
from harness.faults import mutations as mut

from . import NO_VLLM025, VLLM025


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def synthetic_site(tmp_path):
    """A site dir whose files hold every shipped 0.25.0 snippet once, inside a string literal so they compile."""
    files: dict[str, list[str]] = {}
    for f in mut.FAULTS:
        for e in f.edits:
            if e.old not in files.setdefault(e.path, []):
                files[e.path].append(e.old)
    for rel, snippets in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('TEXT = """\n' + "# filler\n".join(snippets) + '"""\n')
    return tmp_path


def test_at_least_eight_faults_spanning_the_dcp_path():
    names = {f.name for f in mut.FAULTS}
    assert len(names) == len(mut.FAULTS) >= 8
    assert {"lse_offset_1e-3", "lse_offset_1e-2", "lse_offset_1e-1", "kv_len_short_last_rank",
            "interleave_off_by_one", "swapped_rank_order", "query_gather_swapped"} <= names
    for f in mut.FAULTS:
        assert all(e.old != e.new and e.old.endswith("\n") for e in f.edits), f.name


@pytest.mark.skipif(not (VLLM025 / "vllm").is_dir(), reason=NO_VLLM025)
def test_every_snippet_found_exactly_once_in_vllm_025():
    assert mut.verify(VLLM025) == []


def test_apply_restore_round_trip_on_synthetic_copy(synthetic_site):
    originals = {p: _sha(p) for p in synthetic_site.rglob("*.py")}
    for f in mut.FAULTS:
        rec = mut.apply(f.name, synthetic_site)
        assert set(rec["files"]) == {e.path for e in f.edits}
        for e in f.edits:
            text = (synthetic_site / e.path).read_text()
            assert e.new in text and text.count(e.old) == 0
        with pytest.raises(mut.MutationError, match="is applied"):
            mut.apply("rank1_dropped", synthetic_site)
        assert mut.restore(synthetic_site)["fault"] == f.name
        assert {p: _sha(p) for p in synthetic_site.rglob("*.py")} == originals
        assert not (synthetic_site / mut.STATE).exists()
    assert mut.restore(synthetic_site) == {"fault": None, "restored": []}


def test_restore_falls_back_to_backup_and_checks_sha(synthetic_site):
    path = synthetic_site / mut.COMMON
    before = _sha(path)
    mut.apply("rank1_dropped", synthetic_site)
    path.write_text(path.read_text() + "# edited after apply\n")
    mut.restore(synthetic_site)
    assert _sha(path) == before


def test_apply_refuses_a_snippet_not_found_once(synthetic_site):
    path = synthetic_site / mut.COMMON
    path.write_text(path.read_text().replace("output = output * factor", "output = output*factor"))
    with pytest.raises(mut.MutationError, match="found 0x"):
        mut.apply("correction_not_applied", synthetic_site)
    with pytest.raises(mut.MutationError, match="unknown fault"):
        mut.apply("nope", synthetic_site)
    assert not (synthetic_site / mut.STATE).exists()


def test_cli_list_and_verify(synthetic_site, capsys):
    assert mut.main(["list"]) == 0
    assert "kv_len_short_last_rank" in capsys.readouterr().out
    assert mut.main(["verify", "--source", str(synthetic_site)]) == 0


def _result(status, rows):
    return {"status": status, "summary": {}, "vllm_version": "0.25.0",
            "cases": [{"id": i, "verdict": v, "max_abs_err": e, "limit": 1e-3, "detail": ""} for i, v, e in rows]}


def test_kill_matrix_on_synthetic_results(tmp_path):
    clean = _result("passed", [("a", "PASS", 1e-5), ("b", "PASS", 0.0), ("c", "SKIP", None)])
    faults = {
        "lse_offset_1e-3": _result("failed", [("a", "FAIL", 5e-2), ("b", "PASS", 0.0), ("c", "SKIP", None)]),
        "invisible": _result("passed", [("a", "PASS", 2e-5), ("b", "PASS", 0.0), ("c", "SKIP", None)]),
        "crashed": None,
    }
    m = km.build(clean, faults, {"lse_offset_1e-3": 0, "invisible": 1})
    f = m["faults"]
    assert f["lse_offset_1e-3"]["killed_by_ops"] and f["lse_offset_1e-3"]["caught"] == 1
    assert f["lse_offset_1e-3"]["cells"]["a"] == {"status": "caught", "verdict": "FAIL", "err": 5e-2,
                                                   "limit": 1e-3, "why": ""}
    assert f["lse_offset_1e-3"]["cells"]["c"]["status"] == "n/a"
    assert not f["invisible"]["killed_by_ops"] and f["invisible"]["missed"] == 2
    assert f["invisible"]["e2e"] == "caught (rc 1)" and f["lse_offset_1e-3"]["e2e"] == "missed (rc 0)"
    assert f["crashed"]["killed_by_ops"] and f["crashed"]["run_broke"]
    md = km.markdown(m)
    assert "| lse_offset_1e-3 | CAUGHT | 1 / 1 | a: caught 0.05/0.001 | missed (rc 0) |" in md
    assert "| invisible | MISSED | 0 / 2 | - | caught (rc 1) |" in md
    # the CLI reads the device script's layout
    (tmp_path / "clean.json").write_text(json.dumps(clean))
    for name, res in faults.items():
        (tmp_path / "faults" / name).mkdir(parents=True)
        if res is not None:
            (tmp_path / "faults" / name / "ops.json").write_text(json.dumps(res))
    (tmp_path / "faults" / "invisible" / "e2e.rc").write_text("1\n")
    assert km.main([str(tmp_path)]) == 0
    assert (tmp_path / "kill_matrix.csv").read_text().splitlines()[0] == "fault,a,b,c,e2e"
    assert json.loads((tmp_path / "kill_matrix.json").read_text())["faults"]["invisible"]["e2e"] == "caught (rc 1)"
