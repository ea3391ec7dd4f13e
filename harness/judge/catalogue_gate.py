"""The catalogue's gate kinds (harness/config/suites.py GATE_KINDS), each judged by one function: a suite whose entry
declares its gate's kind has no gate code of its own. Its vs-reference test and the report's recomputation
(suite_gates.evaluate_gates) both call catalogue_gate with its entry, so the live verdict and the recomputed one are the
same function of the same records."""

from __future__ import annotations

from harness.config.suites import AccuracyGate, MetricGate, Suite
from harness.config.thresholds import Gates
from harness.judge.accuracy_gate import accuracy_gate
from harness.judge.gates import GateResult
from harness.judge.metric_gate import metric_gate
from harness.records.schema import Record

# kind -> its judge: (records, candidate, reference, the suite's entry, the candidate's gates.yaml limits)
JUDGES = {MetricGate: lambda rs, c, r, suite, g: metric_gate(rs, c, r, suite, g.metric_gates.get(suite.gate)),
          AccuracyGate: accuracy_gate}


def catalogue_gate(suite: Suite, records: list[Record], cand: str, ref: str, gates: Gates) -> GateResult:
    """The suite's gate, judged as its entry's gate kind says."""
    return JUDGES[type(suite.gate_kind)](records, cand, ref, suite, gates)
