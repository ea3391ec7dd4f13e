"""Each gated suite's gate function, and all of a pair's gates at once: the dispatcher over the per-suite gate
modules (gates.py for long_prefix and GSM8K, spec_decode_gates.py, long_context.py, ruler.py, capacity.py); which
suites gate, on which records and in which order, is the suite catalogue's (harness/config/suites.py). It sits above
them, so none of them imports it and gates.py imports none of them: no cycle."""

from __future__ import annotations

from harness.config.suites import Suite
from harness.config.suites import gated_suites as catalogued_gates
from harness.config.thresholds import Gates
from harness.judge.capacity import capacity_gate
from harness.judge.gates import GateResult, gsm8k_gate, long_prefix_gates
from harness.judge.long_context import long_context_gate
from harness.judge.metric_gate import metric_gate
from harness.judge.ruler import ruler_gate
from harness.judge.spec_decode_gates import spec_decode_gates, suite_skipped
from harness.records.schema import GateRecord, Record


def spec_decode_suite_gates(records: list[Record], cand: str, ref: str, gates: Gates) -> list[GateResult]:
    return [] if suite_skipped(records) else spec_decode_gates(records, cand, ref, gates.spec_decode)


# The gate function of each gated suite of the catalogue (harness/config/suites.py), which also gives the order.
# Each takes (records, candidate, reference, gates, the pair's workloads as run.json recorded them or None).
GATE_FUNCTIONS = {"long_prefix": long_prefix_gates,
                  "gsm8k": lambda rs, c, r, g, w=None: [gsm8k_gate(rs, c, r, g.gsm8k)],
                  "ruler": lambda rs, c, r, g, w=None: [ruler_gate(rs, c, r, g.ruler)],
                  "spec_decode": lambda rs, c, r, g, w=None: spec_decode_suite_gates(rs, c, r, g),
                  "long_context": lambda rs, c, r, g, w=None: [long_context_gate(rs, c, r)],
                  "capacity": lambda rs, c, r, g, w=None: [capacity_gate(rs, c, r, g.capacity)]}



def catalogue_gate(suite: Suite):
    """A suite whose catalogue entry names a MetricGate: its gate needs no function of its own."""
    return lambda rs, c, r, g, w=None: [metric_gate(rs, c, r, suite, g.metric_gates.get(suite.gate))]


SUITE_GATES = {s.name: catalogue_gate(s) if s.metric_gate else GATE_FUNCTIONS[s.name] for s in catalogued_gates()}


def gated_suites(records: list[Record]) -> list[str]:
    """Suites whose gate a run without a suite list evidently ran: its input records or its recorded verdict exist."""
    gates_seen = {r.gate for r in records if isinstance(r, GateRecord)}
    kinds = {getattr(r, "kind", None) for r in records}
    return [s.name for s in catalogued_gates() if s.gate in gates_seen or kinds & set(s.records)]


def evaluate_gates(records: list[Record], cand: str, ref: str | None, gates: Gates, suites: list[str],
                   workloads: dict | None = None) -> list[GateResult]:
    """Every gate of the suites the run selected, recomputed from its records and the pair's workloads."""
    if ref is None:
        return []
    return [g for suite, gate in SUITE_GATES.items() if suite in suites
            for g in gate(records, cand, ref, gates, workloads)]
