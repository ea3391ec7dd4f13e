"""The long_context grid's CellLimits for tests: a ReferenceCheck judged by gates.yaml-style limits (no calibration,
no floor required) plus a retrieval margin."""

from pathlib import Path

from harness.refcheck.judging.check import CheckLimits, ReferenceCheck
from harness.refcheck.judging.long_context_cells import CellLimits


def cell_limits(drift_limit: float, tie_gap: float, margin: float, check: str = "long_context") -> CellLimits:
    limits = CheckLimits(check, "cpu-smoke", drift_limit, tie_gap, False, Path("floors"), None)
    return CellLimits(ReferenceCheck(limits), margin)
