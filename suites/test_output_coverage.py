"""Outputs checked wherever the work goes (workload output_coverage, refcheck/prompts/coverage_cells.py): deep into a
generation, at a few tokens, either side of every chunked-prefill boundary, over the turns of a session, on blocks
recycled from other requests, and under KV pressure with preemption. Each family is a reference check of its own,
judged by its own limits and floor (its calibration's, or gates.yaml's): every output against the reference arm's
output of the same prompt sent alone. A family whose server counters cannot prove it did what it covers (no
preemption, no eviction, no reuse of the earlier turns) reads FAIL (no data), never PASS; where the arm makes a
proof moot (prefix caching off) the record's detail says what was not exercised. kv_pressure and recycled_blocks run
on the candidate's KV-capped twin where its own KV cache is not capped for them (every GPU arm:
harness/config/kv_twin.py), and run last in the candidate's turn: the twin stops the candidate's server."""

from __future__ import annotations

import pytest

from harness.config.kv_twin import pinned_block_size
from harness.measure.prompts import token_space
from harness.records.schema import ReferenceCheckRecord
from harness.refcheck.judging.compare import checked_to
from harness.refcheck.judging.comparisons import record_fields
from harness.refcheck.prompt_sets.coverage_set import COVERAGE
from harness.refcheck.prompts.coverage_cells import (
    CHUNK,
    LONG_GENERATION,
    MULTI_TURN,
    PRESSURE,
    RECYCLED,
    SHORT,
    random_tokens,
)
from harness.refcheck.send.coverage_send import (
    CoverageServer,
    FamilyOutcome,
    alone_then_together,
    kv_pressure,
    multi_turn,
    recycled_blocks,
)


def skip_reason(session, under_test, served: bool) -> str | None:
    """Read before any server starts: every cell is compared with the reference's output."""
    if session.reference_of(under_test.arm) is None:
        return (f"arm {under_test.arm!r} names no reference arm: output_coverage compares a candidate with its "
                "reference")
    return None


class Family:
    """One family's check on this run's candidate, run on `live` (the candidate's server, or for the KV families its
    KV-capped twin's: the check and its record stay the candidate's): its cells and workload, the server view (its
    comparisons file emptied: a rerun of the check starts it anew), and the judging of what the family left."""

    def __init__(self, check: str, stored, live, session, under_test):
        self.check, self.stored, self.under_test = check, stored, under_test
        self.arm = under_test.candidate
        self.workload, self.prompts, _ = under_test.prompt_set(COVERAGE)
        self.space = token_space(session.arm(self.arm), self.workload)
        sink = session.run_dir / self.arm / f"{check}_vs_{stored.arm}_comparisons.jsonl"
        sink.parent.mkdir(parents=True, exist_ok=True)
        sink.unlink(missing_ok=True)
        self.server = CoverageServer(live, self.workload.top_logprobs, f"coverage-{session.run_id}-{check}", sink)
        s = live.arm.server
        self.on = ([] if live.arm.name == self.arm else
                   [f"on its KV-capped twin {live.arm.name} (--num-gpu-blocks-override {s.kv_cache_blocks}, "
                    f"block size {pinned_block_size(live.arm)})"])

    @property
    def cells(self):
        return self.prompts.family(self.check)

    def judge(self, fam: FamilyOutcome, record) -> None:
        """The family's ReferenceCheckRecord, at the check's limits and floor; the assertion names every failure."""
        arm, check = self.arm, self.under_test.reference_check(self.check, self.stored.noise_key)
        fields = record_fields(self.check, self.stored.arm, self.stored.key, fam.compared, check.drift_limit,
                               self.server.sink, fam.unproven, check.tie_gap)
        fields = check.judge(fields, fam.compared.comparisons, bool(fam.compared.aborted)).fields
        if fam.notes or self.on:
            fields = fields.model_copy(update={"detail": "; ".join([fields.detail, *self.on, *fam.notes])})
        rec = record(ReferenceCheckRecord, arm=arm, of=fields,
                     checked_to_tokens=checked_to(fam.compared.comparisons),
                     cached_tokens_proven=fam.cached_tokens, preemptions_proven=fam.preemptions, covered=fam.covered)
        assert rec.passed, (f"{self.check} on {arm!r} vs {self.stored.arm!r} (reference {self.stored.path}): "
                            f"{rec.detail}\n" + "\n".join(rec.diverged)
                            + (f"\n{fam.compared.aborted}" if fam.compared.aborted else ""))

    def skip_unplanned(self, section: str) -> None:
        """A workload without the family's section skips its check, saying why and what to do."""
        if getattr(self.workload, section) is None:
            pytest.skip(f"workload {self.workload.name!r} plans no {self.check} cells: add its `{section}` section "
                        "(the candidate's KV-capped twin is sized from it: harness/config/kv_twin.py)")


@pytest.mark.parametrize("check", [LONG_GENERATION, SHORT, CHUNK])
def test_output_coverage(check, coverage_outputs, candidate, harness_session, under_test, record):
    """Long generations, short prompts and chunk boundaries: each cell alone, then a family's cells at once (short
    prompts decoding side by side; prefill chunks of the long ones mixed with the short ones' decode steps)."""
    f = Family(check, coverage_outputs, candidate, harness_session, under_test)
    f.judge(alone_then_together(f.server, f.cells, coverage_outputs.outputs, check, together=check != LONG_GENERATION),
            record)


def test_multi_turn(coverage_outputs, candidate, harness_session, under_test, record):
    f = Family(MULTI_TURN, coverage_outputs, candidate, harness_session, under_test)
    f.judge(multi_turn(f.server, f.prompts, coverage_outputs.outputs), record)


def test_recycled_blocks(coverage_outputs, kv_capped, harness_session, under_test, record):
    f = Family(RECYCLED, coverage_outputs, kv_capped, harness_session, under_test)
    f.skip_unplanned("recycled")
    w = f.workload

    def make_fill(lengths: list[int]) -> list[list[int]]:
        return [random_tokens(f.space, w.seed, f"fill-{i}", n) for i, n in enumerate(lengths)]

    f.judge(recycled_blocks(f.server, f.cells, coverage_outputs.outputs, w.recycled, make_fill), record)


def test_kv_pressure(coverage_outputs, kv_capped, harness_session, under_test, record):
    f = Family(PRESSURE, coverage_outputs, kv_capped, harness_session, under_test)
    f.skip_unplanned("pressure")
    f.judge(kv_pressure(f.server, f.cells, coverage_outputs.outputs), record)
