"""Faults planted in a copy of vLLM by name: the tables (tables.py; cpu_coverage's in coverage.py), every table by name
(registry.py), a scratch copy of the installed vllm with faults planted and the arm that imports it (scratch.py), and
`python -m harness.faults.length_faults` (cli.py, whose docstring says what each table holds). The names callers use
are here, so `length_faults.X` reads as before the split."""

from harness.faults import mutations as mut
from harness.faults.length_faults.cli import main
from harness.faults.length_faults.coverage import (
    BLOCK_POOL,
    COVERAGE_FAULTS,
    COVERAGE_NAMES,
    ENV_GEN,
    ENV_RESUME,
    ENV_SHORT,
    ENV_SPLIT,
    ENV_STALE,
    RUNNER,
)
from harness.faults.length_faults.registry import COMPOSABLE, TABLES, TRACED, combined, table, verify_table
from harness.faults.length_faults.scratch import arm_name, arm_yaml, installed_site, make_scratch, replant
from harness.faults.length_faults.tables import (
    BAND_FAULTS,
    BATCH_FAULTS,
    CPU_ATTN,
    CPU_FAULTS,
    DEGENERATION_FAULTS,
    ENV_BAND,
    ENV_EPS,
    ENV_L,
    ENV_OFFSET,
    ENV_PERIOD,
    ENV_SCALE,
    ENV_SEED,
    ENV_SIGMA,
    ENV_STEP,
    ENV_TIE,
    GPU_FAULTS,
    LEGIT_BUILDS,
    LEGIT_NAMES,
    LLAMA,
    LOAD_FAULTS,
    LOGITS,
    MLA_LAYER,
    NAMES,
    NOISE_FAULTS,
)
from harness.faults.mutations import Edit, Fault, MutationError

__all__ = [
    "BAND_FAULTS", "BATCH_FAULTS", "BLOCK_POOL", "COMPOSABLE", "COVERAGE_FAULTS", "COVERAGE_NAMES", "CPU_ATTN",
    "CPU_FAULTS", "DEGENERATION_FAULTS", "ENV_BAND", "ENV_EPS", "ENV_GEN", "ENV_L", "ENV_OFFSET", "ENV_PERIOD",
    "ENV_RESUME", "ENV_SCALE", "ENV_SEED", "ENV_SHORT", "ENV_SIGMA", "ENV_SPLIT", "ENV_STALE", "ENV_STEP", "ENV_TIE",
    "GPU_FAULTS", "LEGIT_BUILDS", "LEGIT_NAMES", "LLAMA", "LOAD_FAULTS", "LOGITS", "MLA_LAYER", "NAMES",
    "NOISE_FAULTS", "RUNNER", "TABLES", "TRACED", "Edit", "Fault", "MutationError", "arm_name", "arm_yaml",
    "combined", "installed_site", "main", "make_scratch", "mut", "replant", "table", "verify_table",
]
