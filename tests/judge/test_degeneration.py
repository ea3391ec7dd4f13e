"""The degeneration detector on loops, near-loops and healthy text, judged against a reference."""

import json
from pathlib import Path

from harness.config.thresholds import DegenerationGates
from harness.judge.degeneration import (
    CleanFlips,
    clean_flips,
    degeneration_fields,
    degeneration_line,
    distinct_n,
    flip_verdicts,
    judge_pair,
    repetition,
    tie_flip_cap,
    tie_flip_p,
)
from harness.records.schema import RequestComparison
from harness.refcheck.judging.compare import tie_flipped

LIMITS = DegenerationGates()
HEALTHY = ("Natalia sold 48 clips in April and half as many in May so she sold 48 / 2 = 24 clips in May and "
           "altogether 48 + 24 = 72 clips in April and May").split()


def test_healthy_text_is_not_repetitive():
    r = repetition(HEALTHY)
    assert r.distinct_2 > 0.8 and r.span < LIMITS.min_span and r.loop_period == 0


def test_a_loop_is_found_with_its_period_and_span():
    units = "the answer is 72 . the answer is 72 . the answer is 72 . the answer is 72 .".split()
    r = repetition(units)
    assert r.loop_period == 5 and r.loop_units == len(units)
    assert r.span == len(units) - 5 and r.span_shift == 5
    assert distinct_n(units) < 0.3


def test_a_single_token_loop():
    r = repetition([7] * 20)
    assert r.loop_period == 1 and r.loop_units == 20 and r.span == 19


def test_a_near_loop_is_caught_by_distinct_2_not_by_the_span():
    # The same five-word unit with one word changed each time: no long exact span, but few distinct bigrams.
    units = []
    for i in range(8):
        units += ["she", "sold", "the", "clips", f"x{i}"]
    r = repetition(units)
    assert r.span < LIMITS.min_span
    cand_vs_healthy = judge_pair("near-loop", units, HEALTHY[:len(units)], LIMITS)
    assert cand_vs_healthy is not None and "distinct-2" in cand_vs_healthy.why


def test_a_looping_candidate_fails_against_a_healthy_reference_quoting_the_span():
    cand = HEALTHY[:10] + ["so", "she", "sold", "72"] * 8
    d = judge_pair("gsm8k-3", cand, HEALTHY[:len(cand)], LIMITS, render=" ".join)
    assert d is not None and "repeated span" in d.why
    line = degeneration_line(d)
    assert line.startswith("request gsm8k-3: more repetitive than the reference") and "so she sold 72" in line


def test_a_candidate_as_repetitive_as_its_reference_passes():
    loop = ["so", "she", "sold", "72"] * 8
    assert judge_pair("same", loop, loop, LIMITS) is None
    assert judge_pair("healthy", HEALTHY, HEALTHY, LIMITS) is None


def test_a_short_repeat_is_below_the_minimum_span():
    cand = HEALTHY[:20] + HEALTHY[:5]  # one five-word phrase again
    assert judge_pair("short", cand, HEALTHY[:25], LIMITS) is None


def test_empty_and_tiny_outputs_do_not_crash():
    assert repetition([]).span == 0 and repetition([1]).distinct_2 == 1.0
    assert judge_pair("empty", [], [], LIMITS) is None


def test_a_loop_without_spaces_is_seen_in_text_units():
    from harness.judge.degeneration import text_units

    cand, ref = text_units(":" * 48), text_units(" ".join(HEALTHY[:20]))
    d = judge_pair("gsm8k-0", cand, ref, LIMITS, render=" ".join)
    assert text_units("x = 4*2.") == ["x", "=", "4", "*", "2", "."]
    assert d is not None and d.candidate.span == 47 and d.quote.startswith(": : :")


# The H200 clean-build case (issue 36, gpu-mla graph_replay r4b8-7): both sides agree up to a bf16 tie flip, then the
# candidate's greedy continuation of the other token loops (45 of 64 units) where the reference's does not (25 of 64).
PREFIX = list(range(100, 116))
REFERENCE_R4B8_7 = PREFIX + [7, 8, 9, 10, 11] * 6 + list(range(200, 218))
CANDIDATE_R4B8_7 = PREFIX + [5, 6, 7] * 16
FIXTURES = Path(__file__).parents[1] / "fixtures"


def calibrated_spread(check: str) -> dict:
    """A check's spread as the H200 calibration of gpu-mla stored it (2026-12-04: K = 3 clean repeats)."""
    rows = json.loads((FIXTURES / "h200_calibration_gpu_mla_2026_12_04.json").read_text())["checks"]
    return next(r["spread"] for r in rows if r["check"] == check)


def flip(request: str, at: int, gap: float) -> RequestComparison:
    return RequestComparison(request=request, prompt_tokens=40, exact=False, first_divergence=at, candidate_tokens=64,
                             reference_tokens=64, finite=True, max_drift=0.01, reference_gap_at_divergence=gap)


def healthy(i: int, n: int = 24) -> list[int]:
    """Ordinary text: no unit repeats (distinct-2 1.0, no repeated span)."""
    return [1000 * (i + 1) + k for k in range(n)]


def outputs(flipped: int, exact: int, tail=None) -> tuple[list, dict]:
    """`flipped` outputs that diverged at a tie flip at token 4 and go on with ordinary text of their own (or
    `tail(i)`), beside `exact` outputs equal to the reference's: (pairs, tie_flipped)."""
    pairs, comparisons = [], []
    for i in range(flipped):
        ref = healthy(i)
        cand = ref[:4] + (tail(i) if tail else healthy(500 + i, 20))
        pairs.append((f"f{i}", cand, ref))
        comparisons.append(flip(f"f{i}", 4, 0.01))
    pairs += [(f"e{i}", healthy(100 + i), healthy(100 + i)) for i in range(exact)]
    return pairs, tie_flipped(comparisons, tie_gap=0.0195)


def test_a_loop_after_a_tie_flip_is_judged_for_a_collapse_only_and_listed():
    """r4b8-7's loop after a flip (span fraction +0.3125, the largest the H200 calibration saw after a clean flip)
    among other outputs judged in full: within gates.yaml's limit after a flip (0.3125 + 0.25); judged alone, the
    ordinary margin flags it."""
    pairs = [("r4b8-7", CANDIDATE_R4B8_7, REFERENCE_R4B8_7)] + [(f"e{i}", healthy(i), healthy(i)) for i in range(7)]
    judged_alone = degeneration_fields(pairs, "gpu-mla-ref", LIMITS)
    assert not judged_alone["passed"] and "45 of 64" in judged_alone["flagged"][0]
    fields = degeneration_fields(pairs, "gpu-mla-ref", LIMITS,
                                 tie_flipped=tie_flipped([flip("r4b8-7", len(PREFIX), 0.125)], tie_gap=0.125))
    assert fields["passed"] and fields["flagged"] == [], fields
    assert fields["tie_flipped"] == ["request r4b8-7: token 16, reference top-2 gap 0.125 <= tie_gap 0.125"]
    assert "(7 compared in full); 1 diverged first at a tie flip, judged for a collapse only (1 of 8 within the cap" \
        in fields["detail"], fields["detail"]


def test_the_same_loop_after_a_confident_divergence_still_fails():
    fields = degeneration_fields([("r4b8-7", CANDIDATE_R4B8_7, REFERENCE_R4B8_7)], "gpu-mla-ref", LIMITS,
                                 tie_flipped=tie_flipped([flip("r4b8-7", len(PREFIX), 3.0)], tie_gap=0.5))
    assert not fields["passed"] and fields["tie_flipped"] == []
    assert "repeated span of 45 of 64 units (reference 25 of 64" in fields["flagged"][0]


def test_the_recorded_h200_case_passes_under_the_calibration_that_measured_it():
    """gpu-mla graph_replay r4b8-7 as recorded on the H200 (2026-12-04, clean build, canonical order; its file:
    <run>/gpu-mla/graph_replay_vs_gpu-mla-ref_diverged_outputs.jsonl): identical for 44 tokens, then a flip where
    the reference's own top-2 gap is 0.0156 (one bf16 step of a logit near 2), then a loop. Judged alone it is the
    issue's "45 of 64 units (reference 25 of 64)". In a run shaped as the H200 qualify runs were (88 outputs, 17 tie
    flips), judged by that calibration (its clean max after a flip is this very output: +0.3125 span, -0.175
    distinct-2; 51 clean flips in 3 x 88, 17 of 88 a repeat), it passes: 0.3125 < 0.3125 + 0.25, and 17 flips are
    within the cap 31."""
    row = json.loads((FIXTURES / "h200_graph_replay_r4b8_7.json").read_text())
    cand, ref = row["candidate"], row["reference"]
    assert cand[:44] == ref[:44] and cand[44] != ref[44]
    alone = degeneration_fields([("r4b8-7", cand, ref)], "r", LIMITS)
    assert "repeated span of 45 of 64 units (reference 25 of 64" in alone["flagged"][0]
    spread = calibrated_spread("graph_replay")
    assert (spread["span_fraction_delta_max"], spread["divergences"]) == (0.3125, 51)
    others, flipped = outputs(16, 71)
    recorded = tie_flipped([flip("r4b8-7", 44, row["reference_gap_at_divergence"])], tie_gap=0.638)
    fields = degeneration_fields([("r4b8-7", cand, ref), *others], "r", LIMITS, tie_flipped={**recorded, **flipped},
                                 calibrated=spread)
    assert fields["passed"], fields["flagged"]
    assert "request r4b8-7: token 44, reference top-2 gap 0.0156 <= tie_gap 0.638" in fields["tie_flipped"]
    assert "17 of 88 within the cap; calibrated clean rate 0.193 (17 of 88 a repeat), cap 31" in fields["detail"]


def near_tie_then_loop(i: int) -> list[int]:
    """What the planted fault does (harness/faults/length_faults/ near_tie_then_loop): the runner-up taken at a
    near-tie, then the last two tokens over and over."""
    return [7, 8] * 10


def test_a_near_tie_flip_then_a_loop_fails_as_a_collapse():
    """The fault flips a near-tie and loops from there: the comparison reads a tie flip (nothing fails it), and the
    loop is a collapse beyond anything clean runs did after a flip, with a calibration and without one."""
    pairs, flipped = outputs(1, 15, tail=near_tie_then_loop)
    for calibrated in (None, calibrated_spread("graph_replay")):
        fields = degeneration_fields(pairs, "cpu-ref", LIMITS, tie_flipped=flipped, calibrated=calibrated)
        assert not fields["passed"]
        (line,) = fields["flagged"]
        assert line.startswith("request f0: more repetitive than the reference: collapse after a tie flip: repeated "
                               "span of 18 of 24 units (reference 0 of 24; limit after a tie flip: "), line
        assert ("calibrated clean max + margin 0.562" if calibrated else
                "gates.yaml's (uncalibrated) clean max + margin 0.562") in line, line
        assert fields["tie_flipped"] == ["request f0: token 4, reference top-2 gap 0.01 <= tie_gap 0.0195"]


def test_a_clean_tie_flip_followed_by_ordinary_text_passes():
    pairs, flipped = outputs(3, 13)
    fields = degeneration_fields(pairs, "cpu-ref", LIMITS, tie_flipped=flipped)
    assert fields["passed"] and fields["flagged"] == [] and len(fields["tie_flipped"]) == 3
    assert fields["detail"].startswith("no output clearly more repetitive than cpu-ref's (13 compared in full); 3 "
                                       "diverged first at a tie flip"), fields["detail"]


def test_all_outputs_tie_flipped_is_never_a_pass():
    """Nothing was judged in full: "0 compared" is no PASS, whatever the cap (gates.yaml's clean counts allow all 4
    of 4: 9 of 14 clean)."""
    pairs, flipped = outputs(4, 0)
    assert tie_flip_cap(4, clean_flips(LIMITS), LIMITS.tie_flip_alpha) == 4
    fields = degeneration_fields(pairs, "cpu-ref", LIMITS, tie_flipped=flipped)
    assert not fields["passed"]
    assert fields["flagged"][0].startswith("no output judged: all 4 diverged first at a tie flip (uncalibrated: "
                                           "gates.yaml's clean rate 0.643 (9 of 14 a repeat), cap 4"), fields["flagged"]
    assert fields["detail"].startswith("no output judged: all 4 diverged first at a tie flip")


def test_tie_flips_over_the_cap_fail_and_at_the_cap_pass():
    """The H200 graph_replay calibration: 51 clean flips in 3 x 88 outputs, 17 of 88 a repeat. Of 88 outputs, 31
    flips pass (one-sided Fisher p > 0.01) and 32 fail, naming the counts, the clean rate and the cap."""
    spread = calibrated_spread("graph_replay")
    clean = clean_flips(LIMITS, spread)
    assert (clean.flips, clean.outputs, clean.rate_calibrated) == (17, 88, True)
    assert tie_flip_cap(88, clean, 0.01) == 31
    assert tie_flip_p(31, 88, clean) > 0.01 >= tie_flip_p(32, 88, clean)
    pairs, flipped = outputs(31, 57)
    at_cap = degeneration_fields(pairs, "gpu-mla-ref", LIMITS, tie_flipped=flipped, calibrated=spread)
    assert at_cap["passed"], at_cap["flagged"]
    pairs, flipped = outputs(32, 56)
    over = degeneration_fields(pairs, "gpu-mla-ref", LIMITS, tie_flipped=flipped, calibrated=spread)
    assert not over["passed"]
    assert over["flagged"] == ["too many tie flips: 32 of 88 outputs diverged first at a tie flip (calibrated clean "
                               "rate 0.193 (17 of 88 a repeat), cap 31: one-sided Fisher exact test, alpha 0.01)"]


def test_the_cap_keeps_its_false_alarm_rate():
    """Exactly, over every calibration a clean build could have measured: a clean run (the same flip rate p as the
    calibration's) exceeds the cap at most alpha of the time, the calibration's own count k ~ Binomial(n, p)
    included. H200 shapes, one repeat's worth: graph_replay (88, p 0.193, runs of 88), long_prefix_outputs (14,
    p 0.643, 12)."""
    from scipy.stats import binom

    for n, m, p in [(88, 88, 51 / 264), (14, 12, 27 / 42), (72, 72, 36 / 216), (64, 32, 0.02)]:
        caps = [tie_flip_cap(m, CleanFlips(k, n, 0, 0, True, True), 0.01) for k in range(n + 1)]
        rate = sum(binom.pmf(k, n, p) * binom.sf(cap, m, p) for k, cap in enumerate(caps))
        assert rate <= 0.01, (n, m, p, rate)


def test_the_cap_keeps_its_false_alarm_rate_when_the_repeats_flip_the_same_requests():
    """K repeats run the same prompts, and a near-deterministic build flips the same requests in each (H200 gpu-mla
    graph_replay: 16-17 a run; 4 of its 6 checks bit-identical): the calibration then holds one build's count K
    times, not K x n independent outputs. Judged through the stored spread as the suites pass it, a clean build (the
    same rate p, its own count on the n prompts) must still exceed the cap at most alpha of the time, at K = 3 and at
    the GPU arms' K = 5. Pooling the K copies as independent outputs read 2.4 % (K = 3) and 3.3 % (K = 5)."""
    from scipy.stats import binom

    for n, p in [(88, 51 / 264), (72, 36 / 216), (14, 27 / 42)]:
        for repeats in (3, 5):
            caps = [tie_flip_cap(n, clean_flips(LIMITS, {"repeats": repeats, "requests": n,
                                                         "divergences": repeats * k}), 0.01) for k in range(n + 1)]
            rate = sum(binom.pmf(k, n, p) * binom.sf(cap, n, p) for k, cap in enumerate(caps))
            assert rate <= 0.01, (n, p, repeats, rate)


def test_the_recorded_h200_keys_fault_flips_more_than_the_cap():
    """keys_past_L_ignored at 64,000 on the H200 (tests/fixtures/h200_drift_2026_12_03): 26 of long_context's 72
    outputs first diverge at a reference gap <= 0.0004, within the calibrated tie gap 0.0195, where the clean
    calibration flipped 36 in 3 x 72, 12 of 72 a repeat: over the cap (25), whatever the degeneration of their texts.
    (long_context's own comparisons are capped alike: tests/refcheck/test_tie_flip_cap.py.)"""
    rows = (FIXTURES / "h200_drift_2026_12_03" / "keys_64000_long_context.jsonl").read_text().splitlines()
    comparisons = [RequestComparison.model_validate_json(line) for line in rows]
    flipped = tie_flipped(comparisons, tie_gap=0.01953125)
    clean = clean_flips(LIMITS, calibrated_spread("long_context"))
    verdict = flip_verdicts(len(flipped), len(comparisons), clean, LIMITS.tie_flip_alpha)
    assert (len(flipped), len(comparisons), tie_flip_cap(72, clean, 0.01)) == (26, 72, 25)
    assert verdict.failure == ("too many tie flips: 26 of 72 outputs diverged first at a tie flip (calibrated clean "
                               "rate 0.167 (12 of 72 a repeat), cap 25: one-sided Fisher exact test, alpha 0.01)")


def test_a_calibration_without_diverged_outputs_keeps_its_rate_and_takes_the_measured_deltas():
    spread = calibrated_spread("long_prefix_outputs")
    assert spread["span_fraction_delta_max"] is None
    clean = clean_flips(LIMITS, spread)
    assert (clean.flips, clean.outputs, clean.rate_calibrated, clean.deltas_calibrated) == (9, 14, True, False)
    assert (clean.span_fraction_delta, clean.distinct_2_delta) == (0.3125, 0.175)
    assert clean_flips(LIMITS, {"repeats": 0, "requests": 0, "divergences": 0}) == clean_flips(LIMITS)
