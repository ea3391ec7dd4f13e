"""The spec_decode suite's output equality: each candidate output against the reference arm's output for the same
prompt, through the existing comparison (exact tokens, drift before the first divergence, tie flips)."""

from __future__ import annotations

from pathlib import Path

from harness.measure.spec_decode_metrics import SpecSample
from harness.refcheck.batches import BatchRun
from harness.refcheck.compare import compare_outputs


def compare_samples(cand: list[SpecSample], ref: list[SpecSample], sink: Path) -> BatchRun:
    """Pairs by prompt id; a prompt one arm lacks, or a failed request, ends the comparison as aborted."""
    theirs = {s.id: s for s in ref}
    run = BatchRun()
    sink.parent.mkdir(parents=True, exist_ok=True)
    with sink.open("w") as f:
        for s in cand:
            other = theirs.get(s.id)
            if s.error or other is None or other.error:
                why = s.error or (f"the reference has no output for {s.id}" if other is None else other.error)
                run.aborted = f"{s.id}: {why}"
                return run
            c = compare_outputs(s.id, 0, s.generation(), other.generation(), s.kind)
            run.comparisons.append(c)
            f.write(c.model_dump_json() + "\n")
    if len(cand) < len(ref):
        run.aborted = f"the candidate answered {len(cand)} of the reference's {len(ref)} prompts"
    return run
