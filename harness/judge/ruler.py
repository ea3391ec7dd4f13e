"""The RULER gate (pure): the candidate's per-sample correctness against the reference's on the same samples.

Exact McNemar on the discordant samples, pooled over every task and length and per length (a length-dependent fault
shows at its lengths and is diluted in the pool), each at alpha / (1 + lengths). It fails only where the candidate
is worse. Missing, aborted or partial input on either arm, or different samples, is FAIL "no data: ...".
"""

from __future__ import annotations

from harness.config.thresholds import RulerGates
from harness.judge.gates import GateResult, latest, paired_accuracy
from harness.judge.stats import mcnemar_exact_p, paired_power
from harness.records.schema import Record, RulerRecord

GATE = "ruler_paired_accuracy"


def ruler_gaps(arm: str, r: RulerRecord | None, limits: RulerGates) -> list[str]:
    """Why one arm's RULER record cannot be judged: missing, aborted, failed requests, nothing per sample."""
    if r is None:
        return [f"no data: no ruler record for {arm}"]
    if r.status == "aborted":
        return [f"no data: {arm} RULER aborted after {r.n} sample(s): {(r.reason or 'no reason').splitlines()[0]}"]
    if r.n == 0 or not r.per_sample:
        return [f"no data: {arm} answered no RULER sample"]
    if r.request_errors > limits.max_request_errors:
        return [f"no data: {arm}: {r.request_errors}/{r.n} RULER request(s) failed "
                f"(at most {limits.max_request_errors})"]
    return []


def by_length(per_sample: dict[str, bool]) -> dict[int, dict[str, bool]]:
    """Pure: the per-sample results split by length ("<task>@<length>#<doc id>")."""
    out: dict[int, dict[str, bool]] = {}
    for key, ok in per_sample.items():
        out.setdefault(int(key.split("@", 1)[1].split("#", 1)[0]), {})[key] = ok
    return out


def ruler_gate(records: list[Record], cand: str, ref: str, limits: RulerGates) -> GateResult:
    mine, theirs = ((latest(records, RulerRecord, a) or [None])[0] for a in (cand, ref))
    failures = [*ruler_gaps(cand, mine, limits), *ruler_gaps(ref, theirs, limits)]
    if not failures and mine.data_sha != theirs.data_sha:
        failures.append(f"no data: the two arms were sent different RULER samples (data_sha {mine.data_sha} vs "
                        f"{theirs.data_sha})")
    if not failures and mine.per_sample.keys() != theirs.per_sample.keys():
        only = sorted(mine.per_sample.keys() ^ theirs.per_sample.keys())
        failures.append(f"no data: {len(only)} RULER sample(s) answered by one arm only (e.g. {only[0]})")
    if failures:
        return GateResult(GATE, "ruler", cand, ref, False, "; ".join(failures))
    lengths = by_length(mine.per_sample)
    alpha = limits.mcnemar_alpha / (1 + len(lengths))
    n, b, c = paired_accuracy(mine.per_sample, theirs.per_sample)
    p = mcnemar_exact_p(b, c)
    reference_right = sum(theirs.per_sample[k] for k in mine.per_sample.keys() & theirs.per_sample.keys())
    lost, power = paired_power(ref, n, c, reference_right, alpha, "RULER samples")
    numbers: dict[str, float | int | None] = {"paired": n, "only_reference": b, "only_candidate": c, "p_value": p,
                                              "alpha_per_test": alpha, "min_lost": lost,
                                              "detectable_drop": None if lost is None else (lost - c) / n}
    worse = []
    if b > c and p < alpha:
        worse.append(f"over all {n} samples {b} only {ref} got right vs {c} only {cand} (exact McNemar p = {p:.4g})")
    failing_lengths = []
    for length in sorted(lengths):
        ln, lb, lc = paired_accuracy(lengths[length], by_length(theirs.per_sample)[length])
        lp = mcnemar_exact_p(lb, lc)
        numbers[f"p_value_{length}"] = lp
        if lb > lc and lp < alpha:
            failing_lengths.append(length)
            worse.append(f"at {length} tokens {lb} of {ln} samples only {ref} got right vs {lc} only {cand} "
                         f"(p = {lp:.4g})")
    numbers["first_failing_length"] = failing_lengths[0] if failing_lengths else None
    if worse:
        first = f"; first failing length {failing_lengths[0]}" if failing_lengths else ""
        detail = (f"{cand} is less accurate than {ref} on RULER: {'; '.join(worse)} (each test at alpha "
                  f"{alpha:.3g}){first}")
        return GateResult(GATE, "ruler", cand, ref, False, detail, numbers)
    detail = (f"{n} paired RULER samples over {len(lengths)} length(s): {b} only {ref} right, {c} only {cand} "
              f"right (p = {p:.4g}); {power}")
    if lost is None and limits.require_signal:
        return GateResult(GATE, "ruler", cand, ref, False, f"no signal: {power}; a strict run (--strict, CI=true) "
                          "needs a gate that can fail (more samples: the workload's limit; or gates.yaml "
                          "ruler.require_signal: false)", numbers)
    return GateResult(GATE, "ruler", cand, ref, True, detail, numbers, no_signal=power if lost is None else None,
                      power=None if lost is None else power)
