"""All of a pair's gates at once, each gated suite's through its catalogue entry (catalogue_gate.py: the entry
declares its gate kind, the kind's function judges it). Which suites gate, on which records and in which order, is
the suite catalogue's (harness/config/suites.py)."""

from __future__ import annotations

from harness.config.suites import gated_suites as catalogued_gates
from harness.config.thresholds import Gates
from harness.judge.catalogue_gate import catalogue_gates
from harness.judge.gates import GateResult
from harness.records.schema import GateRecord, Record


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
    return [g for suite in catalogued_gates() if suite.name in suites
            for g in catalogue_gates(suite, records, cand, ref, gates, workloads)]
