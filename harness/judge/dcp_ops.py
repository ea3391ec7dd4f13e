"""The op-level DCP conformance verdict (pure): the runner's JSON (harness/opcheck/runner.py) -> DcpOpsRecord fields.

Any FAIL or ERROR case fails; a run that did not finish (a rank died, timed out, no result, no cases) fails as
"no data: why", never passes; a run where every case skipped, or the runner itself skipped, is skipped with its reason.
"""

from __future__ import annotations

from pydantic import ValidationError

from harness.records.schema import DcpOpCase

SCHEMA = "dcp-ops/1"
FINISHED = ("passed", "failed")  # the runner's statuses for a run whose every rank reported


def not_run(reason: str, world: int, device: str) -> dict:
    """Fields of a run that was not attempted (e.g. the arm has no DCP): skipped, with why."""
    return {"status": "skipped", "passed": True, "detail": reason, "world": world, "device": device}


def case_line(c: DcpOpCase) -> str:
    nums = (f" (max abs err {c.max_abs_err:.3g} > limit {c.limit:.3g})"
            if c.max_abs_err is not None and c.limit is not None and c.verdict == "FAIL" else "")
    detail = (c.detail or "").strip().splitlines()
    return f"{c.verdict} {c.id}{nums}" + (f": {detail[0][:200]}" if detail else "")


def judge_dcp_ops(result: dict | None, world: int, device: str, problem: str = "",
                  result_path: str | None = None) -> dict:
    """DcpOpsRecord fields (less run_id/arm/suite) from the runner's parsed JSON; `problem` says why it is missing or
    what else went wrong running it (exit code, stderr tail)."""
    base = {"world": world, "device": device, "result_path": result_path}
    if result is None:
        return {**base, "status": "no_data", "passed": False,
                "detail": f"no data: {problem or 'the runner wrote no result'}"}
    base.update(world=result.get("world", world), device=result.get("device", device),
                vllm_version=result.get("vllm_version"), torch_version=result.get("torch_version"),
                limits=result.get("limits", {}).get("combine", result.get("limits", {})),
                summary=result.get("summary") or {})
    if result.get("schema") != SCHEMA:
        return {**base, "status": "no_data", "passed": False,
                "detail": f"no data: result schema {result.get('schema')!r}, expected {SCHEMA!r}"}
    status = result.get("status")
    if status == "skipped":
        return {**base, "status": "skipped", "passed": True,
                "detail": result.get("reason") or "the runner skipped without a reason"}
    try:
        cases = [DcpOpCase.model_validate({k: v for k, v in c.items() if k != "per_rank"})
                 for c in result.get("cases") or []]
    except (ValidationError, AttributeError) as exc:
        return {**base, "status": "no_data", "passed": False, "detail": f"no data: malformed case in the result: {exc}"}
    base["cases"] = cases
    bad = [c for c in cases if c.verdict in ("FAIL", "ERROR")]
    why = "; ".join(x for x in (result.get("reason"), problem) if x)
    if status not in FINISHED or not cases:
        missing = (f"run {status or 'without a status'}" if status not in FINISHED else "the run has no cases")
        lines = [f"no data: {missing}" + (f": {why}" if why else "")] + [case_line(c) for c in bad]
        return {**base, "status": "no_data", "passed": False, "detail": "\n".join(lines)}
    if bad:
        head = f"{len(bad)} of {len(cases)} DCP op case(s) failed on vLLM {base['vllm_version']}:"
        return {**base, "status": "failed", "passed": False, "detail": "\n".join([head, *map(case_line, bad)])}
    skipped = [c for c in cases if c.verdict == "SKIP"]
    if len(skipped) == len(cases):
        return {**base, "status": "skipped", "passed": True,
                "detail": f"every case skipped: {skipped[0].id}: {skipped[0].detail}"}
    return {**base, "status": "passed", "passed": True,
            "detail": f"{len(cases) - len(skipped)} of {len(cases)} case(s) PASS, {len(skipped)} SKIP"
                      + "".join(f"\n{case_line(c)}" for c in skipped)}
