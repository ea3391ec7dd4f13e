"""Comparison tables from result records (pure): pandas frames, rendered as GitHub Markdown."""

from __future__ import annotations

import ast
import re

import numpy as np
import pandas as pd

from harness.config.thresholds import CapacityGates
from harness.judge.baseline import Delta
from harness.judge.gates import GateResult
from harness.judge.validity import outputs_check, outputs_invalid
from harness.records.meaning import of_kind
from harness.records.schema import (
    BUFFERED_STREAM,
    ColdStartRecord,
    DcpOpsRecord,
    Gsm8kRecord,
    KvCapacityRecord,
    LongPrefixRecord,
    MetricRecord,
    OutcomeRecord,
    Record,
    ReferenceCheckRecord,
    RulerRecord,
    ServerRecord,
    SpecDecodeRecord,
)
from harness.report.capacity import capacity_table
from harness.report.long_context import batch_invariance_table, long_context_table


def human_tokens(n: int) -> str:
    """1_933_000 -> '1.933M', as the seed PR writes KV capacity."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.3f}M"
    if n >= 1_000:
        return f"{n / 1_000:.1f}k"
    return str(n)


def first_line(text: str | None, limit: int = 120) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def kv_capacity_table(records: list[Record], arm_order: list[str]) -> pd.DataFrame:
    """Arm, KV tokens, GiB per worker, TP/DCP, backend; an arm whose server failed shows why."""
    kv = {r.arm: r for r in of_kind(records, KvCapacityRecord)}
    servers = {r.arm: r for r in of_kind(records, ServerRecord)}
    if not kv and not any(s.status == "failed" for s in servers.values()):
        return pd.DataFrame()  # the suite did not run
    rows = []
    for arm in arm_order:
        server = servers.get(arm)
        backend = ", ".join(server.backends) if server and server.backends else "not logged"
        if arm in kv:
            r = kv[arm]
            gib = f"{r.gib_per_worker:.2f}" if r.gib_per_worker is not None else "n/a"
            rows.append({"Arm": arm, "KV tokens": human_tokens(r.tokens), "KV GiB per worker": gib,
                         "TP/DCP": f"{r.tp}/{r.dcp}", "Device": r.device, "Attention backend": backend})
        else:
            failed = server is not None and server.status == "failed"
            why = f"server failed: {first_line(server.reason)}" if failed else "not measured"
            rows.append({"Arm": arm, "KV tokens": "n/a", "KV GiB per worker": "n/a", "TP/DCP": "",
                         "Device": "", "Attention backend": why})
    return pd.DataFrame(rows)


def failure_summary(message: str) -> str:
    """The line that says what failed: pytest's first `E ` line (the assertion's own message), not its trailing
    'file:line: AssertionError'; else the first line (pytest.fail without a traceback, skips)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    explained = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    return explained[0] if explained else (lines[0] if lines else "")


def skip_why(message: str) -> str:
    """A skip's reason, however it was recorded: the reason alone, 'Skipped: why', or (runs before the recording
    kept the reason alone) the repr of pytest's (path, line, 'Skipped: why') tuple."""
    text = message.strip()
    if text.startswith("("):
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            parsed = None
        if isinstance(parsed, tuple) and len(parsed) == 3:
            text = str(parsed[2]).strip()
    return text.removeprefix("Skipped:").strip() or "no reason given"


def outcome_detail(r: OutcomeRecord) -> str:
    return first_line(skip_why(r.message) if r.outcome == "skipped" else failure_summary(r.message))


def outcomes_table(records: list[Record]) -> pd.DataFrame:
    rows = [{"Suite": r.suite, "Arm": r.arm, "Test": r.test.split("::")[-1], "Outcome": r.outcome,
             "Detail": outcome_detail(r)}
            for r in of_kind(records, OutcomeRecord)]
    return pd.DataFrame(rows, columns=["Suite", "Arm", "Test", "Outcome", "Detail"])


def to_markdown(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(no results: suite not run)_"
    return df.to_markdown(index=False, tablefmt="github")


def triple_ms(s) -> str:
    if s is None or s.p50 is None:
        return "n/a"
    return f"{s.p50 * 1e3:.3f}/{s.p90 * 1e3:.3f}/{s.p99 * 1e3:.3f} ms"


def usage_pct(u) -> str:
    return "n/a" if u is None else f"{u.mean * 100:.2f}%/{u.peak * 100:.2f}%"


def gpu_mem(mem) -> str:
    """NVML memory used, summed over the arm's GPUs: mean/peak GiB; n/a without a GPU (never 0)."""
    if not mem:
        return "n/a"
    mean = sum(u.mean for u in mem.values() if u) / 1024
    peak = sum(u.peak for u in mem.values() if u) / 1024
    return f"{mean:.2f}/{peak:.2f} GiB"


def ms(seconds: float | None, digits: int = 1) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.{digits}f} ms"


def peaks(running: float | None, waiting: float | None) -> str:
    return "n/a" if running is None and waiting is None else f"{running or 0:g}/{waiting or 0:g}"


# Which TTFT a long-prefix record measured: token-id prompts skip the server's tokenization, text prompts include it.
TTFT_BASIS = {"token_ids": "token ids (excl. tokenization)", "text": "text (incl. tokenization)"}


def bursts(r: LongPrefixRecord) -> str:
    """A TPOT cell's warning where some requests' tokens arrived in bursts (their TPOT timed scheduling)."""
    if not r.bursty_requests:
        return ""
    return f" ({r.bursty_requests}/{r.requests - r.failed} in bursts: scheduling, not decode)"


def untimed(r: LongPrefixRecord) -> str | None:
    """A timing cell's text where the level's streams arrived buffered (their figures would be delivery, not decode)."""
    return BUFFERED_STREAM if r.timing_invalid else None


def outputs_cell(records: list[Record], arm: str, references: dict[str, str | None]) -> str:
    """Whether an arm's timed outputs count: a candidate's matched its reference's (valid) or not (INVALID, and
    why: its figures are not credited); a reference's are what the others are compared with."""
    ref = references.get(arm)
    if ref is None:
        return "reference" if arm in references.values() else "not compared (no reference)"
    why = outputs_invalid(records, arm, ref)
    if why:
        return f"INVALID: {first_line(why, 160)}"
    r = outputs_check(records, arm, ref)
    return f"valid: {r.exact_matches}/{r.requests} exact" + (f" (+{r.tie_flips} tie flips)" if r.tie_flips else "")


def performance_table(records: list[Record], arm_order: list[str],
                      references: dict[str, str | None] | None = None) -> pd.DataFrame:
    """The seed's columns (TPOT percentiles, HBM use) plus TTFT, ITL, E2E, scheduler peaks, NVML memory, failures and
    whether the timed outputs count; a buffered level shows why in place of its timings."""
    refs = references or {}
    perf = of_kind(records, LongPrefixRecord)
    rank = {a: i for i, a in enumerate(arm_order)}
    perf.sort(key=lambda r: (r.concurrency, rank.get(r.arm, len(rank))))
    rows = [{"Arm": r.arm, "Conc": f"c{r.concurrency}",
             "TPOT p50/p90/p99": r.timing_invalid or triple_ms(r.tpot) + bursts(r),
             "HBM use mean/peak": usage_pct(r.kv_usage), "TTFT p50": untimed(r) or ms(r.ttft.p50),
             "TTFT basis": TTFT_BASIS[r.prompt_basis], "ITL p50": untimed(r) or ms(r.itl.p50, 3),
             "E2E p50": ms(r.e2e.p50), "Running/waiting peak": peaks(r.running_peak, r.waiting_peak),
             "GPU mem mean/peak": gpu_mem(r.gpu_memory_mib),
             "Failed": f"{r.failed}/{r.requests}" + (" (aborted)" if r.status == "aborted" else ""),
             "Outputs vs reference": outputs_cell(records, r.arm, refs)}
            for r in perf]
    cols = ["Arm", "Conc", "TPOT p50/p90/p99", "HBM use mean/peak", "TTFT p50", "TTFT basis", "ITL p50", "E2E p50",
            "Running/waiting peak", "GPU mem mean/peak", "Failed", "Outputs vs reference"]
    return pd.DataFrame(rows, columns=cols)


def cold_start_table(records: list[Record], arm_order: list[str]) -> pd.DataFrame:
    """The first request after each server start against the arm's steady-state TPOT p50 (c1)."""
    rank = {a: i for i, a in enumerate(arm_order)}
    cold = sorted(of_kind(records, ColdStartRecord), key=lambda r: rank.get(r.arm, len(rank)))
    rows = [{"Arm": r.arm, "First TTFT": ms(r.ttft_s), "First TPOT": ms(r.tpot_s, 3),
             "Steady TPOT p50": ms(r.steady_tpot_p50_s, 3), "Limit": f"{r.factor_limit:g} x steady",
             "Flag": cold_start_flag(r)} for r in cold]
    return pd.DataFrame(rows)


def cold_start_flag(r: ColdStartRecord) -> str:
    """Without both TPOTs the check judged nothing: 'no data', never 'ok'."""
    if r.error:
        return f"error: {first_line(r.error, 80)}"
    if r.flagged:
        return "FLAGGED"
    if r.tpot_s is None or r.steady_tpot_p50_s is None:
        return f"no data: {first_line(r.no_data, 120)}" if r.no_data else "no data"
    return "ok"


def servers_table(records: list[Record]) -> pd.DataFrame:
    """Every server launch of the run, in order: status, vLLM version, start-up time, attention backend."""
    rows = [{"Arm": r.arm, "Status": r.status if r.status == "up" else f"failed: {first_line(r.reason, 80)}",
             "vLLM": r.vllm_version or "n/a",
             "Start-up": "n/a" if r.startup_s is None else f"{r.startup_s:.1f} s",
             "Attention backend": ", ".join(r.backends) or "not logged",
             "Declared": r.expected_backend or "auto"}
            for r in of_kind(records, ServerRecord)]
    return pd.DataFrame(rows)


def accuracy_table(records: list[Record], arm_order: list[str], flt: str = "strict-match") -> pd.DataFrame:
    """The seed's columns (Arm, exact_match, Correct/N, Request errors) for `flt`, + the other filter and invalid."""
    rank = {a: i for i, a in enumerate(arm_order)}
    rows = []
    for r in sorted(of_kind(records, Gsm8kRecord), key=lambda r: rank.get(r.arm, len(rank))):
        main = r.scores.get(flt)
        other = next((f for f in r.scores if f != flt), None)
        em = "n/a" if main is None or main.exact_match is None else f"{main.exact_match * 100:.2f}%"
        se = "" if main is None or main.stderr is None else f"±{main.stderr * 100:.2f}"
        rows.append({"Arm": r.arm, "exact_match": em, "stderr": se,
                     "Correct/N": f"{main.correct if main else 0}/{r.n}", "Request errors": r.request_errors,
                     f"{other}": (f"{r.scores[other].exact_match * 100:.2f}%"
                                  if other and r.scores[other].exact_match is not None else "n/a"),
                     "Invalid": r.invalid,
                     "Status": r.status if r.status == "complete" else f"aborted: {first_line(r.reason, 60)}"})
    return pd.DataFrame(rows)


def ruler_cell(correct: int, n: int, score: float | None, errors: int = 0) -> str:
    text = f"{correct}/{n}" + ("" if score is None else f", score {score:.2f}")
    return text + (f", {errors} request error(s)" if errors else "")


def ruler_table(records: list[Record], arm_order: list[str]) -> pd.DataFrame:
    """RULER per task and length, arms side by side: samples with every answer found / samples, lm-eval's mean
    string-match score; the last row is each arm's total (and why it stopped, where it did)."""
    rank = {a: i for i, a in enumerate(arm_order)}
    latest_of: dict[str, RulerRecord] = {}
    for r in of_kind(records, RulerRecord):
        latest_of[r.arm] = r  # a resumed arm's later record replaces the earlier one
    arms = sorted(latest_of, key=lambda a: rank.get(a, len(rank)))
    keys = list(dict.fromkeys((c.task, c.length) for a in arms for c in latest_of[a].cells))
    rows = []
    for task, length in keys:
        row = {"Task": task, "Length": length}
        for a in arms:
            c = next((c for c in latest_of[a].cells if (c.task, c.length) == (task, length)), None)
            row[a] = "n/a" if c is None else ruler_cell(c.correct, c.n, c.score, c.request_errors)
        rows.append(row)
    if arms:
        total = {"Task": "all", "Length": ""}
        for a in arms:
            r = latest_of[a]
            total[a] = ruler_cell(sum(r.per_sample.values()), r.n, None, r.request_errors) + (
                "" if r.status == "complete" else f" (aborted: {first_line(r.reason, 60)})")
        rows.append(total)
    return pd.DataFrame(rows, columns=["Task", "Length", *arms])


def verdict_cell(passed: bool, status: str = "complete") -> str:
    return "aborted" if status == "aborted" else ("PASS" if passed else "FAIL")


def drift(value: float | None, limit: float) -> str:
    # The limit as written in gates.yaml: 0.25 must not print as 2e-01.
    return f"{'n/a' if value is None else f'{value:.1e}'} / limit {limit:g}"


FLOOR_COLUMNS = ("Judged by", "Paired vs floor", "Smallest detectable")
P_VALUE = re.compile(r"p = ([\d.e+-]+)")
DETECTABLE = re.compile(r"smallest detectable mean shift of ([^:]+): ([\d.e+-]+) \((\d+) pairs")


def floor_cell(floor: str | None) -> str:
    """The paired test's verdict in a few words; the whole sentence stays in the record and the failure list."""
    if not floor:
        return "n/a"
    if floor.startswith(("FAIL (no data: not calibrated", "FAIL (no data: no accepted floor")):
        return "FAIL: not calibrated (run `harness calibrate`)"
    if floor.startswith(("not calibrated", "no accepted floor")):  # the second: runs recorded before calibrate
        return "none (not calibrated)"
    if floor.startswith("calibration repeat"):
        return "n/a (a calibration repeat)"
    if floor.startswith("FAIL (no data: the calibration cannot be read"):  # runs recorded before issue 55
        return "FAIL: calibration unreadable (run `harness calibrate`)"
    if floor.startswith("FAIL (no data: calibration "):  # unreadable, edited, unsealed or above a ceiling
        return "FAIL: the calibration cannot judge (see the failure; `harness calibrate --trust` replaces it)"
    if floor.startswith("FAIL (no data"):
        return first_line(floor, 120)
    verdict = "FAIL" if "FAIL" in floor else "PASS"
    values = P_VALUE.findall(floor)
    return f"{verdict} (p {', '.join(f'{float(p):.2g}' for p in values)})" if values else first_line(floor, 120)


def detectable_cell(detectable: str | None) -> str:
    found = DETECTABLE.search(detectable or "")
    if detectable and detectable.startswith("no shift below the fixed drift limit"):
        return "none below the limit (no floor)"
    if not found:
        return first_line(detectable, 120) if detectable else "n/a"
    measure, shift, pairs = found.groups()
    return f"{float(shift):.2g} {measure} ({pairs} pairs)"


def reference_checks_table(records: list[Record]) -> pd.DataFrame:
    """Candidate outputs against stored reference outputs: verdict, token match, first divergence, drift, cache hits."""
    rows = [{"Arm vs reference": f"{r.arm} vs {r.reference}", "Check": r.check,
             "Verdict": verdict_cell(r.passed, r.status),
             "Requests": r.requests,
             "Exact match": f"{r.exact_matches}/{r.requests}" + (f" (+{r.tie_flips} tie flips)" if r.tie_flips else ""),
             "First divergence": "none" if r.first_divergence_min is None else f"token {r.first_divergence_min}",
             "Max drift": drift(r.max_drift, r.drift_limit),
             "Cached tokens proven": "n/a" if r.cached_tokens_proven is None else f"{r.cached_tokens_proven:.0f}",
             "Judged by": r.judged_by or "n/a",
             "Paired vs floor": floor_cell(r.floor),
             "Smallest detectable": detectable_cell(r.detectable)}
            for r in of_kind(records, ReferenceCheckRecord)]
    if not any(r.floor for r in of_kind(records, ReferenceCheckRecord)):  # no teacher forcing in the run
        rows = [{k: v for k, v in row.items() if k not in FLOOR_COLUMNS} for row in rows]
    return pd.DataFrame(rows)


def num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


DCP_OPS_COLUMNS = ["Arm", "Op", "Geometry", "dtype", "Max abs err", "Max rel err", "Limit", "Verdict"]


def timing_metrics_table(records: list[Record], arm_order: list[str]) -> pd.DataFrame:
    """The catalogue's timing suites (harness/config/suites.py MetricGate): per suite and arm, what was measured, the
    samples' median and p90, and the requests that failed (no sample)."""
    latest = {(r.suite, r.metric, r.arm): r for r in of_kind(records, MetricRecord)}
    order = {a: i for i, a in enumerate(arm_order)}
    rows = []
    for (suite, metric, arm), r in sorted(latest.items(), key=lambda kv: (kv[0][0], kv[0][1], order.get(kv[0][2], 99))):
        scale, unit = (1e3, "ms") if r.unit == "s" else (1.0, r.unit)
        p50, p90 = (np.percentile(r.samples, q) * scale if r.samples else None for q in (50, 90))
        rows.append({"Suite": suite, "Arm": arm, "Metric": metric, "n": len(r.samples),
                     "p50": f"{p50:.2f} {unit}" if p50 is not None else "n/a",
                     "p90": f"{p90:.2f} {unit}" if p90 is not None else "n/a",
                     "Failed": f"{r.failed}/{r.requests}" + (f": {first_line(r.errors[0])}" if r.errors else ""),
                     "Measured": r.detail})
    return pd.DataFrame(rows)


def dcp_ops_table(records: list[Record], arm_order: list[str]) -> pd.DataFrame:
    """One row per op-level case (suites/test_dcp_ops.py); a run without cases is one row saying why."""
    rank = {a: i for i, a in enumerate(arm_order)}
    rows = []
    for r in sorted(of_kind(records, DcpOpsRecord), key=lambda r: rank.get(r.arm, len(rank))):
        if not r.cases:
            verdict = "skipped" if r.status == "skipped" else "FAIL"
            rows.append({"Arm": r.arm, "Op": "(no cases)", "Geometry": f"{r.device} x{r.world}", "dtype": "",
                         "Max abs err": "n/a", "Max rel err": "n/a", "Limit": "n/a",
                         "Verdict": f"{verdict}: {first_line(r.detail, 160)}"})
        for c in r.cases:
            geometry = " ".join(f"{k}={v}" for k, v in c.geometry.items() if k != "dtype")
            note = f": {first_line(c.detail, 80)}" if c.verdict in ("ERROR", "SKIP") and c.detail else ""
            rows.append({"Arm": r.arm, "Op": c.op, "Geometry": geometry, "dtype": c.dtype or "",
                         "Max abs err": num(c.max_abs_err), "Max rel err": num(c.max_rel_err), "Limit": num(c.limit),
                         "Verdict": c.verdict + note})
    return pd.DataFrame(rows, columns=DCP_OPS_COLUMNS) if rows else pd.DataFrame()


def rates_cell(rates: list[float]) -> str:
    return " / ".join(f"{r:.2f}" for r in rates) if rates else "n/a"


def kv_pair(with_draft: int | None, without: int | None) -> str:
    """KV capacity with the drafter vs the reference without it (a draft model's KV cache takes its share)."""
    shown = "n/a" if with_draft is None else human_tokens(with_draft)
    return shown + ("" if without is None else f" vs {human_tokens(without)}")


def replay_cell(r: SpecDecodeRecord) -> str:
    """An n-gram arm's accepted tokens and drafts against vLLM's proposer replayed over its outputs."""
    if r.method != "ngram":
        return "n/a (a draft model: floor)"
    if r.replay_drafts is None or len(r.replay_accepted) != 2:
        return f"no replay: {r.replay_problem or 'not recorded'}"
    lo, hi = r.replay_accepted
    accepted = "n/a" if r.accepted is None else f"{r.accepted:.0f}"
    drafts = "n/a" if r.drafts is None else f"{r.drafts:.0f}"
    return f"{accepted}/{drafts} vs {lo if lo == hi else f'{lo}-{hi}'}/{r.replay_drafts}"


def spec_decode_table(records: list[Record], arm_order: list[str], gates: list[GateResult] = (),
                      references: dict[str, str | None] | None = None) -> pd.DataFrame:
    """Speculative arms (suites/test_spec_decode.py): acceptance from the /metrics deltas, the speed-up over the
    reference's TPOT p50 on the same prompts (the arm's own reference where `references` names it), and the verdict
    of the suite's gates for that arm."""
    latest = {r.arm: r for r in of_kind(records, SpecDecodeRecord)}
    rows = []
    for arm in [a for a in arm_order if a in latest] + [a for a in latest if a not in arm_order]:
        r = latest[arm]
        if r.method is None:
            continue  # the reference: its figures are the speed-up's denominator
        own = (references or {}).get(arm)
        ref = next((o for o in latest.values() if o.method is None and o.prompts_sha == r.prompts_sha
                    and own in (None, o.arm)), None)
        factor = ref.tpot.p50 / r.tpot.p50 if ref and ref.tpot.p50 and r.tpot.p50 else None
        own = [g for g in gates if g.arm == arm and g.suite == "spec_decode"]
        failed = [g.gate.removeprefix("spec_decode_") for g in own if not g.passed]
        verdict = ("aborted" if r.status == "aborted" else "no gates" if not own
                   else "FAIL: " + ", ".join(failed) if failed else "PASS")
        rows.append({"Arm": arm, "Method": r.method, "k": r.num_speculative_tokens,
                     "Acceptance length": num(r.acceptance_length),
                     "Per-position acceptance": rates_cell(r.position_rates),
                     "Drafts": "n/a" if r.drafts is None else f"{r.drafts:.0f}",
                     "Accepted vs replay": replay_cell(r),
                     "TPOT p50": ms(r.tpot.p50, 2) + (f" vs {ms(ref.tpot.p50, 2)}" if ref else ""),
                     "Speed-up": "n/a" if factor is None else f"{factor:.2f}x",
                     "Tokens/s": num(r.tokens_per_s), "Draft KV": r.draft_kv or "n/a",
                     "KV tokens": kv_pair(r.kv_tokens, ref.kv_tokens if ref else None), "Verdict": verdict})
    return pd.DataFrame(rows)


def gates_table(gates: list[GateResult]) -> pd.DataFrame:
    """One row per candidate-vs-reference gate, as recomputed from the records (or as a test recorded it)."""
    rows = [{"Gate": g.gate, "Arm vs reference": f"{g.arm} vs {g.reference}", "Verdict": verdict_cell(g.passed),
             "Detail": first_line(g.detail, 200)} for g in gates]
    return pd.DataFrame(rows)


def capacity_limits(references: dict[str, str | None] | None, capacity: dict[str, CapacityGates]) -> dict:
    """Each arm's capacity thresholds: a candidate's own (`capacity`, as its run recorded them), and its reference
    judged with the same."""
    out = {}
    for cand, ref in (references or {}).items():
        if cand in capacity:
            out[cand] = capacity[cand]
            if ref:
                out.setdefault(ref, out[cand])
    return out


def build_tables(records: list[Record], arm_order: list[str], gates: list[GateResult] = (),
                 references: dict[str, str | None] | None = None,
                 capacity: dict[str, CapacityGates] | None = None) -> list[tuple[str, pd.DataFrame]]:
    """Every table of a run, titled, in the order a pull request quotes them; `references`: each candidate's;
    `capacity`: each candidate's capacity thresholds as its run recorded them."""
    return [("Accuracy", accuracy_table(records, arm_order)),
            ("RULER", ruler_table(records, arm_order)),
            ("Performance", performance_table(records, arm_order, references)),
            ("Cold start", cold_start_table(records, arm_order)),
            ("KV capacity", kv_capacity_table(records, arm_order)),
            ("Reference checks", reference_checks_table(records)),
            ("Long context", long_context_table(records)),
            ("Batch invariance", batch_invariance_table(records)),
            ("Capacity", capacity_table(records, arm_order, capacity_limits(references, capacity or {}),
                                        {c for c, r in (references or {}).items() if r})),
            ("Timing metrics", timing_metrics_table(records, arm_order)),
            ("DCP op conformance", dcp_ops_table(records, arm_order)),
            ("Spec decode", spec_decode_table(records, arm_order, list(gates), references)),
            ("Gates", gates_table(list(gates))),
            ("Checks", outcomes_table(records)),
            ("Servers", servers_table(records))]


NO_DATA_FLAG = "NO DATA"


def flag_of(d: Delta) -> str:
    """A comparison with a side missing is never "ok": it did not compare anything."""
    if d.no_data:
        return NO_DATA_FLAG
    return "ok" if d.regression is None else "REGRESSION" if d.enforced else "REGRESSION (not enforced)"


def deltas_table(deltas: list[Delta]) -> pd.DataFrame:
    rows = [{"Metric": d.metric, "Arm": d.arm, "Where": d.where, "Baseline": d.baseline, "This run": d.current,
             "Change": d.change, "Threshold / test": d.test, "Flag": flag_of(d)}
            for d in deltas]
    return pd.DataFrame(rows)
