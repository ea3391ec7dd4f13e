"""The catalogue's paired-accuracy gates (harness/config/suites.py AccuracyGate): GSM8K's and RULER's, one function.

Exact McNemar on the paired items, failing only where the candidate is worse; `by_length` gates also test each length
(a length-dependent fault is diluted in the pool). The detail states the smallest drop the items could show. Missing
or partial input, or different samples, is FAIL "no data: ..."."""

from __future__ import annotations

from harness.config.suites import AccuracyGate, Suite, limits_of
from harness.config.thresholds import Gates
from harness.judge.checks import accuracy_floors
from harness.judge.gates import GateResult, paired_accuracy
from harness.judge.stats import mcnemar_exact_p, paired_power
from harness.records.schema import Record


def record_of(records: list[Record], kind: str, arm: str) -> Record | None:
    """An arm's latest record of one kind: a relaunched or resumed arm's later record replaces the earlier one."""
    return next((r for r in reversed(records) if getattr(r, "kind", None) == kind and r.arm == arm), None)


def items_of(r: Record, spec: AccuracyGate, limits) -> dict:
    """item -> correct, from the record's per-item field (by the limits' filter, where they name one)."""
    held = getattr(r, spec.per_item) or {}
    where = getattr(limits, "filter", None)
    return held.get(where) or {} if where else held


def gaps(arm: str, r: Record | None, kind: str, spec: AccuracyGate, limits) -> list[str]:
    """Why one arm's record cannot be judged: missing, aborted, nothing answered, failed requests, no items."""
    if r is None:
        return [f"no data: no {kind} record for {arm}"]
    if r.status == "aborted":
        why = f": {r.reason.splitlines()[0]}" if r.reason else ""
        return [f"no data: {arm} {spec.task} aborted after {r.n} {spec.item}(s){why}"]
    if r.n == 0 or (spec.shared_data and not items_of(r, spec, limits)):
        return [f"no data: {arm} answered no {spec.task} {spec.item}"]
    if r.request_errors > limits.max_request_errors:
        return [f"no data: {arm}: {r.request_errors}/{r.n} {spec.task} request(s) failed "
                f"(at most {limits.max_request_errors})"]
    if not items_of(r, spec, limits):
        where = getattr(limits, "filter", None)
        return [f"no data: {arm} has no per-{spec.item} {where + ' ' if where else ''}results (its samples log is "
                "missing)"]
    return []


def unshared(mine: Record, theirs: Record, spec: AccuracyGate, limits) -> list[str]:
    """Shared data: the arms must have been sent the same samples and answered every one."""
    if mine.data_sha != theirs.data_sha:
        return [f"no data: the two arms were sent different {spec.task} {spec.item}s (data_sha {mine.data_sha} vs "
                f"{theirs.data_sha})"]
    only = sorted(items_of(mine, spec, limits).keys() ^ items_of(theirs, spec, limits).keys())
    if only:
        return [f"no data: {len(only)} {spec.task} {spec.item}(s) answered by one arm only (e.g. {only[0]})"]
    return []


def by_length(per_item: dict[str, bool]) -> dict[int, dict[str, bool]]:
    """Pure: the per-item results split by length ("<task>@<length>#<doc id>")."""
    out: dict[int, dict[str, bool]] = {}
    for key, ok in per_item.items():
        out.setdefault(int(key.split("@", 1)[1].split("#", 1)[0]), {})[key] = ok
    return out


def no_signal_failure(spec: AccuracyGate, power: str) -> str:
    return (f"no signal: {power}; a strict run (--strict, CI=true) needs a gate that can fail (more {spec.item}s: the "
            f"workload's limit; or gates.yaml {spec.limits}.require_signal: false)")


def accuracy_gate(records: list[Record], cand: str, ref: str, suite: Suite, gates: Gates) -> GateResult:
    spec, limits, kind = suite.accuracy_gate, limits_of(suite, gates), suite.records[0]
    mine, theirs = (record_of(records, kind, a) for a in (cand, ref))
    failures = [*gaps(cand, mine, kind, spec, limits), *gaps(ref, theirs, kind, spec, limits)]
    if not failures and spec.shared_data:
        failures = unshared(mine, theirs, spec, limits)
    if failures:
        return GateResult(suite.gate, suite.name, cand, ref, False, "; ".join(failures))
    judge = pooled_and_by_length if spec.by_length else pooled
    return judge(suite, cand, ref, (mine, theirs), limits)


def pooled(suite: Suite, cand: str, ref: str, pair: tuple[Record, Record], limits) -> GateResult:
    """One exact McNemar over every paired item at mcnemar_alpha, and the candidate's accuracy floors."""
    spec, alpha = suite.accuracy_gate, limits.mcnemar_alpha
    mine, theirs = (items_of(r, spec, limits) for r in pair)
    n, b, c = paired_accuracy(mine, theirs)
    p = mcnemar_exact_p(b, c)
    reference_right = sum(1 for q in mine.keys() & theirs.keys() if theirs[q])
    lost, power = paired_power(ref, n, c, reference_right, alpha, spec.items)
    numbers = {"paired": n, "only_reference": b, "only_candidate": c, "p_value": p, "min_lost": lost,
               "detectable_drop": None if lost is None else (lost - c) / n}
    failures = accuracy_floors(cand, sum(mine.values()), pair[0].n, getattr(limits, "min_accuracy", None),
                               getattr(limits, "wilson_floor", None))
    if b > c and p < alpha:
        failures.insert(0, f"{cand} is less accurate than {ref}: {b} {spec.item}s only {ref} got right vs {c} only "
                           f"{cand} got right (exact McNemar p = {p:.4f} < {alpha:g})")
    no_signal = power if not failures and lost is None else None
    if no_signal and limits.require_signal:
        failures.append(no_signal_failure(spec, power))
    detail = "; ".join(failures) or f"{n} paired {spec.items}, {b} only {ref} right, {c} only {cand} right; {power}"
    return GateResult(suite.gate, suite.name, cand, ref, not failures, detail, numbers,
                      no_signal=None if failures else no_signal, power=None if failures or no_signal else power)


def pooled_and_by_length(suite: Suite, cand: str, ref: str, pair: tuple[Record, Record], limits) -> GateResult:
    """Exact McNemar pooled over every length and at each length, each at mcnemar_alpha / (1 + lengths) (Bonferroni:
    the gate is one verdict)."""
    spec = suite.accuracy_gate
    mine, theirs = (items_of(r, spec, limits) for r in pair)
    lengths = by_length(mine)
    alpha = limits.mcnemar_alpha / (1 + len(lengths))
    n, b, c = paired_accuracy(mine, theirs)
    p = mcnemar_exact_p(b, c)
    reference_right = sum(theirs[k] for k in mine.keys() & theirs.keys())
    lost, power = paired_power(ref, n, c, reference_right, alpha, spec.items)
    numbers: dict[str, float | int | None] = {"paired": n, "only_reference": b, "only_candidate": c, "p_value": p,
                                              "alpha_per_test": alpha, "min_lost": lost,
                                              "detectable_drop": None if lost is None else (lost - c) / n}
    worse = []
    if b > c and p < alpha:
        worse.append(f"over all {n} {spec.item}s {b} only {ref} got right vs {c} only {cand} (exact McNemar p = "
                     f"{p:.4g})")
    failing_lengths = []
    theirs_by_length = by_length(theirs)
    for length in sorted(lengths):
        ln, lb, lc = paired_accuracy(lengths[length], theirs_by_length[length])
        lp = mcnemar_exact_p(lb, lc)
        numbers[f"p_value_{length}"] = lp
        if lb > lc and lp < alpha:
            failing_lengths.append(length)
            worse.append(f"at {length} tokens {lb} of {ln} {spec.item}s only {ref} got right vs {lc} only {cand} "
                         f"(p = {lp:.4g})")
    numbers["first_failing_length"] = failing_lengths[0] if failing_lengths else None
    if worse:
        first = f"; first failing length {failing_lengths[0]}" if failing_lengths else ""
        detail = (f"{cand} is less accurate than {ref} on {spec.task}: {'; '.join(worse)} (each test at alpha "
                  f"{alpha:.3g}){first}")
        return GateResult(suite.gate, suite.name, cand, ref, False, detail, numbers)
    if lost is None and limits.require_signal:
        return GateResult(suite.gate, suite.name, cand, ref, False, no_signal_failure(spec, power), numbers)
    detail = (f"{n} paired {spec.items} over {len(lengths)} length(s): {b} only {ref} right, {c} only {cand} "
              f"right (p = {p:.4g}); {power}")
    return GateResult(suite.gate, suite.name, cand, ref, True, detail, numbers,
                      no_signal=power if lost is None else None, power=None if lost is None else power)
