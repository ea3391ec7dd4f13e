"""The spec_decode suite's output equality: each candidate output against the reference arm's output for the same
prompt, through the existing comparison (exact tokens, drift before the first divergence, tie flips), judged as any
reference check (refcheck/judging/check.py), and the degeneration detectors on the same pairs (text and token ids)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config.thresholds import Gates
from harness.judge.degeneration import degeneration_fields, text_units
from harness.judge.spec_decode_gates import EQUALITY_CHECK
from harness.judge.token_runs import with_token_runs
from harness.measure.spec_decode_metrics import SpecSample, read_samples
from harness.records.meaning import of_kind
from harness.records.schema import Record, ReferenceCheckFields, SpecDecodeRecord
from harness.refcheck.judging.check import ReferenceCheck
from harness.refcheck.judging.compare import compare_outputs, tie_flipped
from harness.refcheck.judging.comparisons import BatchComparisons, record_fields


def compare_samples(cand: list[SpecSample], ref: list[SpecSample], sink: Path) -> BatchComparisons:
    """Pairs by prompt id; a prompt one arm lacks, or a failed request, ends the comparison as aborted."""
    theirs = {s.id: s for s in ref}
    compared = BatchComparisons()
    sink.parent.mkdir(parents=True, exist_ok=True)
    with sink.open("w") as f:
        for s in cand:
            other = theirs.get(s.id)
            if s.error or other is None or other.error:
                why = s.error or (f"the reference has no output for {s.id}" if other is None else other.error)
                compared.aborted = f"{s.id}: {why}"
                return compared
            c = compare_outputs(s.id, 0, s.generation(), other.generation(), s.kind)
            compared.comparisons.append(c)
            f.write(c.model_dump_json() + "\n")
    if len(cand) < len(ref):
        compared.aborted = f"the candidate answered {len(cand)} of the reference's {len(ref)} prompts"
    return compared


@dataclass(frozen=True)
class Equality:
    """The candidate's outputs against the reference's: a ReferenceCheckRecord's and a DegenerationRecord's fields."""

    check: ReferenceCheckFields
    degeneration: dict


def compare_arms(records: list[Record], cand: str, ref: str, run_dir: Path, gates: Gates,
                 check: ReferenceCheck | None = None) -> Equality | None:
    """The two arms' latest spec_decode samples files compared; None when either arm has none. `check`: the check's
    limits (the candidate's reference_check), paired with its floor; None: gates.yaml's limits alone."""
    mine = [r for r in of_kind(records, SpecDecodeRecord) if r.arm == cand]
    theirs = [r for r in of_kind(records, SpecDecodeRecord) if r.arm == ref]
    if not (mine and theirs and mine[-1].samples_path and theirs[-1].samples_path):
        return None
    c_samples, r_samples = read_samples_or_empty(mine[-1].samples_path), read_samples_or_empty(theirs[-1].samples_path)
    sink = run_dir / cand / f"spec_decode_vs_{ref}_comparisons.jsonl"
    compared = compare_samples(c_samples, r_samples, sink)
    fixed = gates.reference_checks
    limit = check.drift_limit if check else fixed.limit_for(EQUALITY_CHECK)
    tie_gap = check.tie_gap if check else fixed.tie_gap
    fields = record_fields(EQUALITY_CHECK, ref, f"spec_decode compared {ref}", compared, limit, sink, [], tie_gap)
    if check is not None:
        fields = check.judge(fields, compared.comparisons, bool(compared.aborted)).fields
    by_id = {s.id: s for s in r_samples if not s.error}
    pairs = [(s.id, text_units(s.text), text_units(by_id[s.id].text))
             for s in c_samples if not s.error and s.id in by_id]
    spread = check.calibrated_spread if check else None
    loops = degeneration_fields(pairs, ref, gates.degeneration, " ".join, tie_flipped(compared.comparisons, tie_gap),
                                spread)
    # token ids too: a placeholder that is a special token leaves no text to judge
    ids = [(s.id, s.token_ids, by_id[s.id].token_ids) for s in c_samples if not s.error and s.id in by_id]
    return Equality(fields, with_token_runs(loops, ids, gates.degeneration.min_token_run))


def read_samples_or_empty(path: str) -> list[SpecSample]:
    """A samples file that is gone leaves no comparison: the gates then read 'no data'."""
    try:
        return read_samples(Path(path))
    except OSError:
        return []
