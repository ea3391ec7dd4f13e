"""The long-prefix workload's own outputs against the reference's on the same prompts (pure): a speed figure counts
only when the requests it timed produced the reference's tokens (issue 22; MLPerf's TEST06 does the same).

Both arms stream each request's output token ids with top-2 logprobs into their samples files (measure/loadgen).
Requests pair by (concurrency level, index) -- the same prompt on both arms, same prompts_sha. Per pair: exact
prefix length, first divergence, the reference's own top-2 gap there (a near-tie flip is not a fault), drift before
it (refcheck/judging/compare.py). A sample of the reference's outputs is also teacher-forced on the candidate
(refcheck/judging/teacher_forcing.py): every position scored on the same text, past any early divergence.

A request that cannot be paired (the reference's failed or is missing, the candidate's failed) leaves the outputs'
validity unknown: a "no data" line, never a silent drop.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from harness.measure.generation import Generation
from harness.records.schema import ReferenceCheckFields, RequestComparison
from harness.refcheck.judging.compare import checked_to, compare_outputs, judge_comparisons, summary_fields

CHECK = "long_prefix_outputs"


def request_id(level: int, index: int) -> str:
    return f"c{level} #{index}"


def generation_of(row: dict) -> Generation | None:
    """A samples-file row's output as a Generation; None for a failed request or a row written before outputs were
    kept (no token ids)."""
    if row.get("error") or not row.get("token_ids"):
        return None
    logprobs = [math.nan if x is None else float(x) for x in row.get("logprobs") or []]
    top = [{int(k): float(v) for k, v in (t or {}).items()} for t in row.get("top") or []]
    return Generation([int(t) for t in row["token_ids"]], logprobs, top)


def by_request(rows: Iterable[dict]) -> dict[tuple[int, int], dict]:
    """(level, index) -> row; a request written twice (a resumed level) keeps its last line."""
    return {(int(r["level"]), int(r["index"])): r for r in rows if "level" in r and "index" in r}


def why_unusable(row: dict | None, arm: str) -> str:
    if row is None:
        return f"{arm} has no sample for it"
    if row.get("error"):
        return f"{arm}'s request failed ({str(row['error']).splitlines()[0][:160]})"
    return f"{arm}'s sample has no output tokens (written before outputs were kept)"


def pair_outputs(cand: dict[tuple[int, int], dict], ref: dict[tuple[int, int], dict], cand_name: str, ref_name: str
                 ) -> tuple[list[tuple[tuple[int, int], Generation, Generation, int]], list[str]]:
    """(key, candidate output, reference output, prompt tokens) for every request both arms finished with tokens,
    in request order, and one "no data" line per request that could not be paired. The candidate's requests are the
    ones to validate: every key of either arm is expected of both."""
    pairs, gaps = [], []
    for key in sorted(cand.keys() | ref.keys()):
        c_row, r_row = cand.get(key), ref.get(key)
        c_gen = generation_of(c_row) if c_row else None
        r_gen = generation_of(r_row) if r_row else None
        if c_gen is None or r_gen is None:
            who = why_unusable(r_row, ref_name) if r_gen is None else why_unusable(c_row, cand_name)
            gaps.append(f"no data: request {request_id(*key)}: {who}")
            continue
        prompt = c_row.get("prompt_tokens") or r_row.get("prompt_tokens") or 0
        pairs.append((key, c_gen, r_gen, int(prompt)))
    return pairs, gaps


def compare_pairs(pairs: list[tuple[tuple[int, int], Generation, Generation, int]]) -> list[RequestComparison]:
    return [compare_outputs(request_id(*key), prompt, c, r, group=f"c{key[0]}") for key, c, r, prompt in pairs]


def forced_picks(keys: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """`n` requests spread evenly over the paired ones (first and last included), for teacher forcing."""
    keys = sorted(keys)
    if n <= 0 or not keys:
        return []
    if n >= len(keys):
        return keys
    if n == 1:
        return [keys[0]]
    return [keys[round(i * (len(keys) - 1) / (n - 1))] for i in range(n)]


@dataclass
class TimedComparisons:
    """What the long-prefix outputs check compared (harness/refcheck/send/timed_check.py TimedOutputsCompared adds where
    from)."""

    generated: list[RequestComparison]  # per paired request
    forced: list[RequestComparison]  # TeacherForcedComparison per scored request
    gaps: list[str]  # "no data: ..." per request (or arm) that could not be compared
    aborted: str | None  # why teacher forcing stopped early

    @property
    def comparisons(self) -> list[RequestComparison]:
        return [*self.generated, *self.forced]


def checked_fields(compared: TimedComparisons, reference: str, drift_limit: float, tie_gap: float,
                   extra_failures: Iterable[str] = (), reference_key: str = "") -> ReferenceCheckFields:
    """The check's verdict and numbers for the long-prefix outputs: the free generations judged as
    refcheck/judging/compare.py judges any generation (tie flips by the reference's top-2 gap), the teacher-forced
    sample the same way, every unpaired request a "no data" failure, and the degeneration detector's lines. Validity
    unknown (gaps, an aborted scoring) makes the record aborted: the TPOT gate then reads no data."""
    generated, forced, gaps, aborted = compared.generated, compared.forced, compared.gaps, compared.aborted
    extra = list(extra_failures)
    gen = judge_comparisons(CHECK, generated, drift_limit, tie_gap)
    parts = [gen.detail]
    failures = [*gaps, *extra, *(gen.failures if generated else [])]
    if forced:
        tf = judge_comparisons("teacher-forced sample", forced, drift_limit, tie_gap)
        parts.append(tf.detail)
        failures += [f"teacher-forced {line}" for line in tf.failures]
    if gaps:
        parts.append(f"{len(gaps)} request(s) not compared")
    if aborted:
        failures.insert(0, f"aborted: {aborted.splitlines()[0]}")
    unknown = bool(gaps) or aborted is not None or not generated
    reason = None
    if unknown:
        reason = aborted or (gaps[0] + (f" (and {len(gaps) - 1} more)" if len(gaps) > 1 else "") if gaps
                             else "no data: no request was compared")
    return ReferenceCheckFields(check=CHECK, reference=reference, reference_key=reference_key,
                                passed=not failures and not unknown, detail="; ".join([*parts, *extra]),
                                drift_limit=drift_limit, diverged=failures,
                                status="aborted" if unknown else "complete", reason=reason,
                                checked_to_tokens=checked_to([*generated, *forced]),
                                **summary_fields([*generated, *forced], tie_gap))


def samples_files(records: Iterable, arm: str, prompts_sha: str) -> tuple[dict[int, str], list[str]]:
    """An arm's long-prefix samples file per level (its latest record of each), or why its outputs are unknown: no
    record at all, or records of other prompts (a shared reference measured for another candidate's workload)."""
    latest = {r.concurrency: r for r in records if getattr(r, "kind", None) == "long_prefix" and r.arm == arm}
    if not latest:
        return {}, [f"no data: {arm} recorded no long_prefix level (its test failed or did not run)"]
    other = sorted({r.prompts_sha for r in latest.values()} - {prompts_sha})
    if other:
        return {}, [f"no data: {arm} was sent other prompts (prompts_sha {', '.join(other)}, not {prompts_sha})"]
    return {c: r.samples_path for c, r in sorted(latest.items())}, []
