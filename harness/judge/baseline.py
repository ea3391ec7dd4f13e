"""Baseline diff: this run against an earlier one (e.g. last night's), with regression flags.

Thresholds come from the `baseline:` section of configs/gates.yaml. TPOT is judged on the per-request samples of
both runs (a one-sided rank test with each run's own spread, and a minimum effect size); KV capacity by relative
change; accuracy by a statistical test (exact McNemar on per-question results matched by doc id when both
sample logs exist, else a two-proportion z-test), never by a raw difference. The comparisons are pure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from harness.config.thresholds import BaselineThresholds
from harness.judge.stats import (
    mcnemar_exact_p,
    slowdown_test,
    smallest_detectable_slowdown,
    smallest_p,
    two_proportion_p,
)
from harness.records.meaning import of_kind
from harness.records.schema import Gsm8kRecord, KvCapacityRecord, LongPrefixRecord, Record


@dataclass(frozen=True)
class Delta:
    metric: str
    arm: str
    where: str  # "c1", filter name, or ""
    baseline: str
    current: str
    change: str
    test: str  # the threshold or test that judged it
    regression: str | None  # the sentence, when flagged
    enforced: bool = True  # False: a flag shown, not failing the run (baseline.tpot_not_enforced)
    power: str = ""  # the smallest change this comparison could have flagged (TPOT), for the headline

    @property
    def fails(self) -> bool:
        return self.regression is not None and self.enforced

    @property
    def no_data(self) -> bool:
        """One side had nothing to compare: judged neither ok nor regressed, and said so."""
        return self.test.startswith("no data")

    @property
    def unjudged(self) -> str:
        return f"{' '.join(filter(None, (self.arm, self.where)))}: {self.metric}: {self.test}"


def rel(cur: float, base: float) -> float:
    return (cur - base) / base if base else 0.0


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def tpot_delta(arm: str, conc: int, cur: list[float], base: list[float], alpha: float, effect: float) -> Delta:
    """One arm and concurrency: per-request TPOT of this run against the baseline's. A side without samples reads
    'no data', never ok; too few requests to reach alpha are named."""
    where, bar = f"c{conc}", f"p < {alpha:g} and > +{effect:.0%}"
    if not cur or not base:
        missing = " and ".join(w for w, s in (("this run", cur), ("baseline", base)) if not s)
        return Delta("TPOT p50", arm, where, ms(float(np.median(base))) if base else "n/a",
                     ms(float(np.median(cur))) if cur else "n/a", "n/a", f"no data: no TPOT samples in {missing}",
                     None)
    p, change, (low, high) = slowdown_test(cur, base)
    test = (f"Mann-Whitney one-sided, n {len(cur)} vs {len(base)}: p = {p:.4f}; median {change:+.1%} "
            f"(95% CI {low:+.1%}..{high:+.1%}); flag: {bar}")
    if smallest_p(len(cur), len(base)) >= alpha:
        test += f"; too few requests to reach p < {alpha:g}"
    power = tpot_power(cur, base, alpha, effect)
    test += f"; {power}"
    flag = (f"{arm} {where}: TPOT p50 {ms(float(np.median(cur)))} is {change:+.1%} vs baseline "
            f"{ms(float(np.median(base)))} (n {len(cur)} vs {len(base)}, Mann-Whitney p = {p:.4f} < {alpha:g}, "
            f"above the +{effect:.0%} effect size)") if p < alpha and change > effect else None
    return Delta("TPOT p50", arm, where, ms(float(np.median(base))), ms(float(np.median(cur))), f"{change:+.1%}",
                 test, flag, power=power)


def tpot_power(cur: list[float], base: list[float], alpha: float, effect: float) -> str:
    """The sentence: the smallest TPOT slowdown this pair of runs could have flagged, at their n and this run's
    spread (two runs of identical code on one H200 differed by up to 31 % at n 6 vs 6: a +15 % regression there
    passes unseen, and this says so)."""
    d = smallest_detectable_slowdown(cur, base, alpha, effect)
    where = f"Mann-Whitney one-sided at alpha {alpha:g}, n {len(cur)} vs {len(base)}"
    if d is None:
        return f"no slowdown is detectable ({where}: too few requests)"
    bound = " (the effect size)" if d <= effect else " (with this run's spread)"
    return f"smallest detectable slowdown +{d:.1%}{bound}, {where}"


def power_lines(deltas: list[Delta]) -> list[str]:
    """The headline's statement of the baseline diff's power: one line per arm and concurrency of TPOT."""
    return [f"Baseline {d.metric} {d.arm} {d.where}: {d.power}" for d in deltas if d.power]


NOT_ENFORCED = " (not enforced for this arm: gates.yaml baseline.tpot_not_enforced)"


def timed_tpots(r: LongPrefixRecord) -> list[float]:
    """A level's per-request TPOTs; none where its streams arrived buffered (an older record still lists them)."""
    return [] if r.timing_invalid else r.tpot_samples_s or []


def tpot_deltas(cur: list[Record], base: list[Record], t: BaselineThresholds) -> list[Delta]:
    """Per arm and concurrency of this run, from the records' per-request TPOT samples. An arm in
    `tpot_not_enforced` (the CPU pair, whose client-side TPOT on shared cores measures scheduling) is flagged as
    usual, and the flag does not fail the run."""
    old = {(r.arm, r.concurrency): timed_tpots(r) for r in of_kind(base, LongPrefixRecord)}
    out = []
    for r in of_kind(cur, LongPrefixRecord):
        d = tpot_delta(r.arm, r.concurrency, timed_tpots(r), old.get((r.arm, r.concurrency), []),
                       t.tpot_alpha, t.tpot_effect_size_per_arm.get(r.arm, t.tpot_effect_size))
        if r.arm in t.tpot_not_enforced:
            d = replace(d, enforced=False, regression=d.regression and d.regression + NOT_ENFORCED)
        out.append(d)
    return out


def kv_deltas(cur: list[Record], base: list[Record], tol: float) -> list[Delta]:
    old = {r.arm: r.tokens for r in of_kind(base, KvCapacityRecord)}
    out = []
    for r in of_kind(cur, KvCapacityRecord):
        b = old.get(r.arm)
        if b is None:
            out.append(Delta("KV tokens", r.arm, "", "n/a", str(r.tokens), "n/a",
                             "no data: no KV capacity record in baseline", None))
            continue
        change = rel(r.tokens, b)
        flag = (f"{r.arm}: KV capacity {r.tokens} tokens is {change:+.1%} vs baseline {b} (limit -{tol:.0%})"
                if change < -tol else None)
        out.append(Delta("KV tokens", r.arm, "", str(b), str(r.tokens), f"{change:+.1%}", f"-{tol:.0%} max", flag))
    return out


def accuracy_delta(arm: str, flt: str, cur: tuple[int, int], base: tuple[int, int],
                   cur_q: dict[int, bool] | None, base_q: dict[int, bool] | None, alpha: float) -> Delta:
    """Paired exact McNemar when both per-question results exist, else the two-proportion z-test."""
    (kc, nc), (kb, nb) = cur, base
    acc_c, acc_b = (kc / nc if nc else 0.0), (kb / nb if nb else 0.0)
    if cur_q is not None and base_q is not None and cur_q.keys() & base_q.keys():
        common = cur_q.keys() & base_q.keys()
        lost = sum(1 for q in common if base_q[q] and not cur_q[q])
        won = sum(1 for q in common if cur_q[q] and not base_q[q])
        p, worse = mcnemar_exact_p(lost, won), lost > won
        test = f"McNemar exact, {len(common)} paired, {lost} lost / {won} won: p = {p:.4f}"
    else:
        p, worse = two_proportion_p(kc, nc, kb, nb), acc_c < acc_b
        test = f"two-proportion z (unpaired): p = {p:.4f}"
    flag = (f"{arm}: accuracy {acc_c:.2%} ({kc}/{nc}) vs baseline {acc_b:.2%} ({kb}/{nb}) is significantly "
            f"lower ({test} < {alpha:g})") if worse and p < alpha else None
    return Delta("exact_match", arm, flt, f"{acc_b:.2%} ({kb}/{nb})", f"{acc_c:.2%} ({kc}/{nc})",
                 f"{(acc_c - acc_b) * 100:+.2f} pt", test, flag)


def accuracy_deltas(cur: list[Record], base: list[Record], flt: str, alpha: float) -> list[Delta]:
    """Per arm: paired by doc id where both records carry per-question results, else unpaired."""
    old = {r.arm: r for r in of_kind(base, Gsm8kRecord)}
    out = []
    for r in of_kind(cur, Gsm8kRecord):
        b = old.get(r.arm)
        if b is None or flt not in r.scores or flt not in b.scores:
            missing = " and ".join(w for w, rec in (("this run", r), ("baseline", b))
                                   if rec is None or flt not in rec.scores)
            out.append(Delta("exact_match", r.arm, flt, "n/a", "n/a", "n/a", f"no data: no {flt} score in {missing}",
                             None))
            continue
        out.append(accuracy_delta(r.arm, flt, (r.scores[flt].correct, r.n), (b.scores[flt].correct, b.n),
                                  (r.per_question or {}).get(flt), (b.per_question or {}).get(flt), alpha))
    return out


def baseline_deltas(cur: list[Record], base: list[Record], t: BaselineThresholds) -> list[Delta]:
    """This run's records against a baseline run's, per arm: TPOT p50, KV capacity, accuracy."""
    return [*tpot_deltas(cur, base, t), *kv_deltas(cur, base, t.kv_tokens_rel_decrease),
            *accuracy_deltas(cur, base, t.filter, t.accuracy_alpha)]
