"""The catalogue's gate kinds (harness/config/suites.py GATE_KINDS), each judged by one function: a suite's entry
declares its gate's kind, and no suite has gate code of its own. Its vs-reference test and the report's recomputation
(suite_gates.evaluate_gates) both call catalogue_gates with its entry, so the live verdict and the recomputed one are
the same function of the same records."""

from __future__ import annotations

from harness.config.suites import (
    AccuracyGate,
    LevelTimingGate,
    MetricGate,
    RecordedVerdictGate,
    SloCapacityGate,
    SpeculativeGates,
    Suite,
    limits_of,
)
from harness.config.thresholds import Gates
from harness.judge.accuracy_gate import accuracy_gate
from harness.judge.capacity import capacity_gate
from harness.judge.gates import GateResult, long_prefix_gates
from harness.judge.long_context import long_context_gate
from harness.judge.metric_gate import metric_gate
from harness.judge.spec_decode_gates import spec_decode_gates, suite_skipped
from harness.records.schema import Record

# kind -> its judge: (records, candidate, reference, the suite's entry, the candidate's gates.yaml limits, the pair's
# workloads as run.json recorded them or None) -> the suite's gates, its own (suite.gate) first
JUDGES = {
    MetricGate: lambda rs, c, r, suite, g, w: [metric_gate(rs, c, r, suite, g.metric_gates.get(suite.gate))],
    AccuracyGate: lambda rs, c, r, suite, g, w: [accuracy_gate(rs, c, r, suite, g)],
    LevelTimingGate: lambda rs, c, r, suite, g, w: long_prefix_gates(rs, c, r, limits_of(suite, g), g.coverage, w),
    SloCapacityGate: lambda rs, c, r, suite, g, w: [capacity_gate(rs, c, r, limits_of(suite, g))],
    RecordedVerdictGate: lambda rs, c, r, suite, g, w: [long_context_gate(rs, c, r)],
    SpeculativeGates: lambda rs, c, r, suite, g, w: ([] if suite_skipped(rs)
                                                    else spec_decode_gates(rs, c, r, limits_of(suite, g))),
}


def catalogue_gates(suite: Suite, records: list[Record], cand: str, ref: str, gates: Gates,
                    workloads: dict | None = None) -> list[GateResult]:
    """The suite's gates, judged as its entry's gate kind says."""
    return JUDGES[type(suite.gate_kind)](records, cand, ref, suite, gates, workloads)
