"""Baseline diff: this run against an earlier one (e.g. last night's), with regression flags.

Thresholds come from the `baseline:` section of configs/gates.yaml. TPOT and KV capacity are judged by relative
change; accuracy by a statistical test (exact McNemar on per-question results matched by doc id when both
sample logs exist, else a two-proportion z-test), never by a raw difference. The comparisons are pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.config.arms import read_yaml
from harness.config.errors import ConfigError
from harness.config.gates import GATES_FILE
from harness.config.paths import REPORTS_DIR
from harness.records.schema import Gsm8kRecord, KvCapacityRecord, LongPrefixRecord, Record
from harness.judge.stats import mcnemar_exact_p, two_proportion_p


class BaselineThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tpot_p50_rel_increase: float = Field(0.10, ge=0)  # flag TPOT p50 more than 10% above the baseline's
    kv_tokens_rel_decrease: float = Field(0.01, ge=0)  # flag KV capacity more than 1% below the baseline's
    accuracy_alpha: float = Field(0.05, gt=0, lt=1)  # flag lower accuracy when the test rejects equality
    filter: str = "strict-match"


def load_thresholds(path: Path = GATES_FILE) -> BaselineThresholds:
    try:
        return BaselineThresholds.model_validate(read_yaml(path).get("baseline") or {})
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: invalid baseline thresholds: {fields}") from None


def baseline_results(arg: str) -> Path:
    """A run directory, a results file, or a run id under reports/."""
    for candidate in (Path(arg), REPORTS_DIR / arg):
        if candidate.is_dir() and (candidate / "results.jsonl").is_file():
            return candidate / "results.jsonl"
        if candidate.is_file():
            return candidate
    raise ConfigError(f"baseline {arg!r}: no results.jsonl there (nor in {REPORTS_DIR / arg}); "
                      "pass a run directory or its results.jsonl")


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


def rel(cur: float, base: float) -> float:
    return (cur - base) / base if base else 0.0


def tpot_deltas(cur: list[Record], base: list[Record], tol: float) -> list[Delta]:
    old = {(r.arm, r.concurrency): r.tpot.p50 for r in base if isinstance(r, LongPrefixRecord)}
    out = []
    for r in (r for r in cur if isinstance(r, LongPrefixRecord)):
        b, c = old.get((r.arm, r.concurrency)), r.tpot.p50
        if b is None or c is None:
            out.append(Delta("TPOT p50", r.arm, f"c{r.concurrency}", "n/a" if b is None else f"{b * 1e3:.3f} ms",
                             "n/a" if c is None else f"{c * 1e3:.3f} ms", "n/a", f"+{tol:.0%} max", None))
            continue
        change = rel(c, b)
        flag = (f"{r.arm} c{r.concurrency}: TPOT p50 {c * 1e3:.3f} ms is {change:+.1%} vs baseline "
                f"{b * 1e3:.3f} ms (limit +{tol:.0%})") if change > tol else None
        out.append(Delta("TPOT p50", r.arm, f"c{r.concurrency}", f"{b * 1e3:.3f} ms", f"{c * 1e3:.3f} ms",
                         f"{change:+.1%}", f"+{tol:.0%} max", flag))
    return out


def kv_deltas(cur: list[Record], base: list[Record], tol: float) -> list[Delta]:
    old = {r.arm: r.tokens for r in base if isinstance(r, KvCapacityRecord)}
    out = []
    for r in (r for r in cur if isinstance(r, KvCapacityRecord)):
        b = old.get(r.arm)
        if b is None:
            out.append(Delta("KV tokens", r.arm, "", "n/a", str(r.tokens), "n/a", f"-{tol:.0%} max", None))
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


def accuracy_deltas(cur: list[Record], base: list[Record], flt: str, alpha: float,
                    per_question: dict[tuple[str, str], dict[int, bool] | None]) -> list[Delta]:
    """per_question[(side, arm)] with side 'current'/'baseline': doc id -> correct, or None without a sample log."""
    old = {r.arm: r for r in base if isinstance(r, Gsm8kRecord)}
    out = []
    for r in (r for r in cur if isinstance(r, Gsm8kRecord)):
        b = old.get(r.arm)
        if b is None or flt not in r.scores or flt not in b.scores:
            out.append(Delta("exact_match", r.arm, flt, "n/a", "n/a", "n/a", "not compared", None))
            continue
        out.append(accuracy_delta(r.arm, flt, (r.scores[flt].correct, r.n), (b.scores[flt].correct, b.n),
                                  per_question.get(("current", r.arm)), per_question.get(("baseline", r.arm)),
                                  alpha))
    return out


def read_per_question(path: Path, flt: str) -> dict[int, bool]:
    """doc id -> correct under `flt`, from lm-eval's per-sample log."""
    out = {}
    for line in path.read_text().splitlines():
        try:
            s = json.loads(line)
        except json.JSONDecodeError:
            continue
        if s.get("filter") == flt and "doc_id" in s:
            out[int(s["doc_id"])] = bool(s.get("exact_match"))
    return out


def compare(cur: list[Record], base: list[Record], t: BaselineThresholds,
            per_question: dict[tuple[str, str], dict[int, bool] | None]) -> list[Delta]:
    return [*tpot_deltas(cur, base, t.tpot_p50_rel_increase), *kv_deltas(cur, base, t.kv_tokens_rel_decrease),
            *accuracy_deltas(cur, base, t.filter, t.accuracy_alpha, per_question)]


def deltas_table(deltas: list[Delta]) -> pd.DataFrame:
    rows = [{"Metric": d.metric, "Arm": d.arm, "Where": d.where, "Baseline": d.baseline, "This run": d.current,
             "Change": d.change, "Threshold / test": d.test, "Flag": "REGRESSION" if d.regression else "ok"}
            for d in deltas]
    return pd.DataFrame(rows)
