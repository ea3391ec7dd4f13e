"""Each gated suite's gate, and all of a pair's gates at once: a suite whose catalogue entry declares a gate kind is
judged through its entry (catalogue_gate.py: ttft, gsm8k, ruler); the others by their gate function here, over the
per-suite gate modules (gates.py for long_prefix, spec_decode_gates.py, long_context.py, capacity.py). Which suites
gate, on which records and in which order, is the suite catalogue's (harness/config/suites.py). It sits above them,
so none of them imports it and gates.py imports none of them: no cycle."""

from __future__ import annotations

from harness.config.suites import Suite
from harness.config.suites import gated_suites as catalogued_gates
from harness.config.thresholds import Gates
from harness.judge.capacity import capacity_gate
from harness.judge.catalogue_gate import catalogue_gate
from harness.judge.gates import GateResult, long_prefix_gates
from harness.judge.long_context import long_context_gate
from harness.judge.spec_decode_gates import spec_decode_gates, suite_skipped
from harness.records.schema import GateRecord, Record


def spec_decode_suite_gates(records: list[Record], cand: str, ref: str, gates: Gates) -> list[GateResult]:
    return [] if suite_skipped(records) else spec_decode_gates(records, cand, ref, gates.spec_decode)


# The gate function of each gated suite whose entry declares no gate kind (harness/config/suites.py). Each takes
# (records, candidate, reference, gates, the pair's workloads as run.json recorded them or None).
GATE_FUNCTIONS = {"long_prefix": long_prefix_gates,
                  "spec_decode": lambda rs, c, r, g, w=None: spec_decode_suite_gates(rs, c, r, g),
                  "long_context": lambda rs, c, r, g, w=None: [long_context_gate(rs, c, r)],
                  "capacity": lambda rs, c, r, g, w=None: [capacity_gate(rs, c, r, g.capacity)]}


def through_entry(suite: Suite):
    """A suite whose catalogue entry declares its gate kind: judged through the entry."""
    return lambda rs, c, r, g, w=None: [catalogue_gate(suite, rs, c, r, g)]


# Every gated suite's gate, in the catalogue's order (the Gates table's).
SUITE_GATES = {s.name: through_entry(s) if s.gate_kind else GATE_FUNCTIONS[s.name] for s in catalogued_gates()}


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
