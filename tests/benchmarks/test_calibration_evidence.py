"""docs/evidence/h200-2026-12-04b.md against the files beside it: its calibration tables are what
benchmarks/calibration_evidence.py renders from calibration-final.json (and from the limits 872cdda's gates.yaml set by
hand), and the build it names is the one its runs recorded."""

import copy
import json
import re
from pathlib import Path

from benchmarks.calibration_evidence import against_hand_set, counted, hand_set_limits, limits_table
from tests.refcheck.test_h200_drift_limits import HAND_SET

EVIDENCE = Path(__file__).resolve().parents[2] / "docs" / "evidence"
PAGE = EVIDENCE / "h200-2026-12-04b.md"
CALIBRATION = json.loads((EVIDENCE / "h200-2026-12-04b" / "calibration-final.json").read_text())
SOURCE = "872cdda's configs/gates.yaml"


def blocks(page: str) -> dict[str, str]:
    return dict(re.findall(r"<!-- calibration_evidence: (\S+) -->\n(.*?)\n<!-- calibration_evidence: end -->", page,
                           re.S))


def disagreements(page: str, calibration: dict, hand_set: dict) -> list[str]:
    found = blocks(page)
    expected = {"limits": limits_table(calibration), "hand-set": against_hand_set(calibration, hand_set, SOURCE)}
    return [f"{PAGE.name}: block {name!r} is not what benchmarks/calibration_evidence.py renders from the JSON; "
            f"rerun it and paste" for name, text in expected.items() if found.get(name) != text]


def test_the_pages_tables_are_the_json_rendered():
    assert disagreements(PAGE.read_text(), CALIBRATION, HAND_SET) == []


def test_a_number_the_page_changes_or_the_json_changes_is_a_disagreement():
    page = PAGE.read_text()
    # The page's old claim: graph_replay's drift limit "2.0 -> 1.43" where the JSON records 0.25 before.
    assert "| 0.25 -> 1.43 |" in page
    assert disagreements(page.replace("| 0.25 -> 1.43 |", "| 2.0 -> 1.43 |", 1), CALIBRATION, HAND_SET)
    moved = copy.deepcopy(CALIBRATION)
    moved["checks"][0]["after"]["tie_gap"] = 0.4  # graph_replay's calibrated tie gap: in both tables
    assert [re.search(r"block '(\S+)'", d)[1] for d in disagreements(page, moved, HAND_SET)] == ["limits", "hand-set"]
    raised = {**HAND_SET, "graph_replay": (2.0, 0.25)}  # a hand-set column other than 872cdda's
    assert [re.search(r"block '(\S+)'", d)[1] for d in disagreements(page, CALIBRATION, raised)] == ["hand-set"]


def test_the_tie_gaps_against_the_hand_set_half_are_four_tighter_and_two_that_rose():
    tie = {c["check"]: (HAND_SET[c["check"]][1], c["after"]["tie_gap"]) for c in CALIBRATION["checks"]}
    assert counted(tie).startswith("4 tighter (3.13x-25.6x: ")
    assert counted(tie).endswith(", 2 rose (graph_replay, graph_replay_eager)")


def test_hand_set_limits_read_a_gates_document_as_872cdda_wrote_it():
    gates = {"defaults": {"reference_checks": {"drift_limit": 0.01, "drift_limits": {}, "tie_gap": 0.0}},
             "arms": {"gpu-mla": {"reference_checks": {"drift_limit": 0.25, "drift_limits": {"prefix_reuse": 2.0},
                                                       "tie_gap": 0.5}}}}
    assert hand_set_limits(gates, "gpu-mla", ["prefix_reuse", "long_context"]) == {"prefix_reuse": (2.0, 0.5),
                                                                                   "long_context": (0.25, 0.5)}
    assert hand_set_limits(gates, "cpu-smoke", ["prefix_reuse"]) == {"prefix_reuse": (0.01, 0.0)}


def test_the_page_names_the_build_its_runs_recorded():
    for run in ("qualify-1", "qualify-2"):
        commit = json.loads((EVIDENCE / "h200-2026-12-04b" / run / "run.json").read_text())["git_commit"]
        sha, _, modified = commit.partition("+")
        assert f"`{sha[:7]}{'+' + modified if modified else ''}`" in PAGE.read_text()
