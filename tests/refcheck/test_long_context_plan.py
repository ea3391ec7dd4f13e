"""The long_context grid as one plan run by one executor: the plan (pure) lists every request in the order sent --
each cell's modes then forced, shortest first, then the sweep, then the bursts -- with each warm-up and the hit it
must prove; the executor sends it in that order against a stand-in server, and a failed request stops the grid where
it is (the bursts after it read "not run", never a pass)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.config.cache_unit import expected_hit
from harness.config.errors import ConfigError, WorkloadError
from harness.config.workloads import LongContextWorkload
from harness.measure.generation import Generation
from harness.measure.prompts import TokenSpace
from harness.refcheck.prompts.burst_plan import Burst
from harness.refcheck.prompts.long_context import (
    ContextCell,
    build_long_context_prompts,
    build_sweep_prompts,
    partial_warmup,
)
from harness.refcheck.prompts.long_context_plan import plan_grid
from harness.refcheck.send.long_context_grid import BURSTS, GridClient, GridLimits, run_grid
from tests.cell_limits import cell_limits

SPACE = TokenSpace(512, frozenset({0, 1, 2}))
LIMITS = GridLimits(cell_limits(0.01, 0.0, 0.1), cell_limits(0.25, 0.0, 0.1, "long_context_bursts"))


def workload(**kw) -> LongContextWorkload:
    base = {"name": "t", "lengths": [256, 128], "depths": [0.0, 1.0], "span_tokens": 12, "cue_tokens": 4,
            "output_tokens": 8, "sweep_lengths": 1, "jitter_per_gap": 0}
    return LongContextWorkload.model_validate({**base, **kw})


def plan_of(w: LongContextWorkload, caching_on: bool = True, max_batch: int = 3):
    cells, sweep = build_long_context_prompts(w, SPACE).all(), build_sweep_prompts(w, SPACE, seed=1).all()
    return plan_grid(w, cells, sweep, caching_on, 16, max_batch), cells, sweep


def test_the_plan_lists_every_request_in_the_order_sent():
    w = workload()
    plan, cells, sweep = plan_of(w)
    assert [r.request for r in plan.sequential[:4]] == ["L128-d0-cold", "L128-d0-warm", "L128-d0-partial",
                                                        "L128-d0-forced"]
    assert [r.cell.length for r in plan.sequential] == [128] * 8 + [256] * 8  # shortest first
    assert [(r.request, r.group, r.where) for r in plan.sweep] == [("L192-d0.5-sweep", "length 192, depth 0.5, sweep",
                                                                    "sweep length 192, depth 0.5")]
    assert [b.name for b in plan.bursts] == ["L128 depths", "L256 depths", "mixed 2", "mixed 3"]
    assert plan.steps() == [*plan.sequential, *plan.sweep, *plan.bursts]
    assert (plan.planned, plan.bursts_planned) == (16 + 1 + 9, 9)
    cold, warm, partial, forced = plan.sequential[:4]
    assert cold.warmup is None and cold.hit_expected is None and forced.warmup is None
    assert warm.warmup == cells[0].tokens and warm.hit_expected == expected_hit(128, 128, 16) == 112
    assert partial.warmup == partial_warmup(cells[0], 64, w.seed) and partial.hit_expected == 64


def test_caching_off_proves_no_hit_and_a_workload_without_bursts_plans_none():
    plan, _, _ = plan_of(workload(bursts=False, modes=["warm", "partial"]), caching_on=False)
    assert [r.mode for r in plan.sequential[:3]] == ["warm", "partial", "forced"]
    assert all(r.hit_expected is None for r in plan.sequential) and plan.bursts == []
    assert plan.planned == 12 + 1


def test_a_length_without_a_whole_shared_block_is_refused_whichever_modes_run():
    with pytest.raises(ConfigError, match="less than one prefix-cache unit"):
        plan_of(workload(lengths=[40, 128], partial_shared=0.1, modes=["cold"], bursts=False))


class StandIn(GridClient):
    """A server that answers every prompt with its cell's span, logs each request, and fails the `fail_at`-th."""

    def __init__(self, fail_at: int | None = None):
        super().__init__(SimpleNamespace(server=SimpleNamespace(log_text=lambda: "last line")), None, "s")
        self.sent: list[str] = []
        self.fail_at = fail_at

    def answer(self, what: str, cells: list[ContextCell]) -> list[Generation]:
        self.sent.append(what)
        if len(self.sent) == self.fail_at:
            raise WorkloadError("request failed")
        return [Generation(list(c.expected), [-0.1] * len(c.expected), [{t: -0.1} for t in c.expected])
                for c in cells]

    def hits(self) -> float | None:
        return 1e9 + len(self.sent) * 1e4  # every cached prefix reused

    def generate(self, cell, tokens, mode):
        return self.answer(f"{mode} {cell.id}" + (" warm-up" if tokens != cell.tokens else ""), [cell])[0]

    def burst(self, burst: Burst):
        return self.answer(f"burst {burst.name}", burst.cells)

    def forced(self, cell, ref_tokens):
        return self.answer(f"forced {cell.id}", [cell])[0]

    def forced_budget(self) -> int | None:
        return None


def reference(cells: list[ContextCell]) -> dict[str, Generation]:
    return {c.id: Generation(list(c.expected), [-0.1] * len(c.expected), [{t: -0.1} for t in c.expected])
            for c in cells}


def test_the_executor_sends_the_plan_in_order_and_judges_each_check_apart(tmp_path):
    plan, cells, sweep = plan_of(workload())
    client = StandIn()
    sink = tmp_path / "long_context_vs_ref_comparisons.jsonl"
    outcome = run_grid(client, plan, reference(cells + sweep), LIMITS, sink)
    assert client.sent[:6] == ["cold L128-d0", "warm L128-d0", "warm L128-d0", "partial L128-d0 warm-up",
                               "partial L128-d0", "forced L128-d0"]
    assert client.sent[-5:] == ["sweep L192-d0.5", "burst L128 depths", "burst L256 depths", "burst mixed 2",
                                "burst mixed 3"]
    assert outcome.aborted is None and all(c.passed for c in outcome.cells) and len(outcome.cells) == plan.planned
    lc, bursts = outcome.checks()
    assert (lc.name, bursts.name, bursts.limits) == ("long_context", BURSTS, LIMITS.bursts)
    assert len(sink.read_text().splitlines()) == 17 and len(bursts.sink.read_text().splitlines()) == 2 * 9
    assert [r.batch for r in outcome.batch_invariance()] == [2, 3]


def test_a_failed_request_stops_the_grid_and_its_bursts_read_not_run(tmp_path):
    plan, cells, sweep = plan_of(workload())
    client = StandIn(fail_at=3)
    outcome = run_grid(client, plan, reference(cells + sweep), LIMITS, tmp_path / "long_context_vs_ref.jsonl")
    lc, bursts = outcome.checks()
    assert len(client.sent) == 3 and [c.mode for c in outcome.cells] == ["cold"]
    assert lc.compared.aborted.startswith("length 128, depth 0: request failed\nserver log tail:\nlast line")
    assert bursts.compared.aborted == ("not run: the grid stopped before its bursts (length 128, depth 0: request "
                                       "failed)")
    assert bursts.beyond_comparisons == ["no data: 0 of 9 burst cells compared"]
    assert outcome.aborted == lc.compared.aborted
