"""Every fault table by name (the CLI's --table), one table's faults, several faults combined into one, and a table
checked against a vLLM source tree."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.faults import mutations as mut
from harness.faults.aligned_faults import ALIGNED_FAULTS
from harness.faults.length_faults.coverage import COVERAGE_FAULTS
from harness.faults.length_faults.tables import (
    BAND_FAULTS,
    BATCH_FAULTS,
    CPU_FAULTS,
    DEGENERATION_FAULTS,
    GPU_FAULTS,
    LEGIT_BUILDS,
    LLAMA,
    LOAD_FAULTS,
    MLA_LAYER,
    NOISE_FAULTS,
)
from harness.faults.mutations import Fault, MutationError
from harness.faults.preemption_faults import CPU_PREEMPTION_FAULTS, GPU_PREEMPTION_FAULTS
from harness.faults.prefill_faults import CROSS_REQUEST_FAULTS
from harness.faults.spec_faults import SPEC_FAULTS

TABLES = {"cpu": CPU_FAULTS, "gpu": GPU_FAULTS, "cpu_load": LOAD_FAULTS, "cpu_noise": NOISE_FAULTS,
          "cpu_batch": BATCH_FAULTS, "cpu_band": BAND_FAULTS, "cpu_degeneration": DEGENERATION_FAULTS,
          "cpu_coverage": COVERAGE_FAULTS, "cpu_legit": LEGIT_BUILDS, "cpu_spec": SPEC_FAULTS, "gpu_spec": SPEC_FAULTS,
          "cpu_preemption": CPU_PREEMPTION_FAULTS, "gpu_preemption": GPU_PREEMPTION_FAULTS,
          "cpu_aligned": ALIGNED_FAULTS, "cpu_cross_request": CROSS_REQUEST_FAULTS}
COMPOSABLE = {"cpu_coverage"}  # tables whose faults can share one scratch: `verify` checks all of them applied at once
TRACED = {LLAMA, MLA_LAYER}  # model code torch.compile traces (the attention backends run as opaque custom ops)


def table(name: str) -> dict[str, Fault]:
    """One table's faults by name; "a+b": tables a and b together (a legitimate build on the noisy build's scratch)."""
    return {f.name: f for part in name.split("+") for f in TABLES[part]}


def combined(names: Sequence[str], faults: dict[str, Fault]) -> Fault:
    """One fault carrying the edits of several, in the order named: applied file by file, each edit to the text the
    ones before it left (an insertion after an anchor keeps that anchor, so faults at one spot compose)."""
    unknown = [n for n in names if n not in faults]
    if unknown or not names:
        raise MutationError(f"unknown fault {', '.join(unknown) or '(none named)'}; known: {', '.join(faults)}")
    if len(set(names)) != len(names):
        raise MutationError(f"a fault named twice: {', '.join(names)}")
    if len(names) == 1:
        return faults[names[0]]
    picked = [faults[n] for n in names]
    return Fault("+".join(names), " ; ".join(f.site for f in picked), " | ".join(f.what for f in picked),
                 tuple(e for f in picked for e in f.edits))


def verify_table(source: Path, which: str) -> list[str]:
    """Each fault of the table applies alone; a COMPOSABLE table's faults also apply all at once."""
    problems = mut.verify(source, TABLES[which])
    if which in COMPOSABLE and not problems:
        problems = mut.verify(source, (combined([f.name for f in TABLES[which]], table(which)),))
    return problems
