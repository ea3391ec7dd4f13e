"""Limits from dtypes (configs/gates.yaml `dcp_ops`) and the comparison of a result with the float64 reference."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

GATES = Path(__file__).resolve().parents[2] / "configs" / "gates.yaml"

EPS = {
    "float64": float(np.finfo(np.float64).eps),
    "float32": float(np.finfo(np.float32).eps),
    "float16": float(np.finfo(np.float16).eps),
    "bfloat16": 2.0**-7,
}


class Tolerances(BaseModel):
    """The combine limits' factors (configs/gates.yaml `dcp_ops`; the harness validates them there too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    k_out: float
    k_lse: float


def load_tolerances(path: Path = GATES, arm: str | None = None) -> Tolerances:
    """`defaults.dcp_ops` of gates.yaml merged with `arms.<arm>.dcp_ops`, read with yaml alone: this runs in the server
    environment, which has no harness.config. The harness passes the arm's limits explicitly (--k-out/--k-lse)."""
    raw = yaml.safe_load(path.read_text()) or {}
    section = dict((raw.get("defaults") or {}).get("dcp_ops") or {})
    if arm:
        section.update(((raw.get("arms") or {}).get(arm) or {}).get("dcp_ops") or {})
    try:
        return Tolerances.model_validate(section)
    except ValidationError as exc:
        raise ValueError(f"{path}: dcp_ops: {exc}") from exc


def eps(dtype: str) -> float:
    try:
        return EPS[dtype.removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"no epsilon known for dtype {dtype!r}") from None


def max_finite_abs(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    finite = x[np.isfinite(x)]
    return float(np.max(np.abs(finite))) if finite.size else 0.0


def combine_out_limit(tol: Tolerances, out_dtype: str, lse_dtype: str, scale: float, lse_mag: float) -> float:
    return scale * (tol.k_out * eps(out_dtype) + tol.k_lse * eps(lse_dtype) * (1.0 + lse_mag))


def combine_lse_limit(tol: Tolerances, lse_dtype: str, lse_mag: float) -> float:
    return tol.k_lse * eps(lse_dtype) * (1.0 + lse_mag)


@dataclass(frozen=True)
class Deviation:
    max_abs: float
    max_rel: float  # max_abs / max |reference| (normalised; not elementwise, which explodes near zero)
    where: str  # first offending index, "" if none


def deviation(got: np.ndarray, ref: np.ndarray) -> Deviation:
    """Max abs/rel error; a non-finite value where the reference differs (NaN, an -inf mismatch) counts as inf."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return Deviation(float("inf"), float("inf"), f"shape {got.shape} != reference {ref.shape}")
    same_nonfinite = (~np.isfinite(ref)) & (got == ref)
    with np.errstate(invalid="ignore"):
        err = np.where(same_nonfinite, 0.0, np.abs(got - ref))
    err = np.where(np.isnan(err), np.inf, err)
    if err.size == 0:
        return Deviation(0.0, 0.0, "")
    worst = float(np.max(err))
    where = "" if worst == 0 else str(tuple(int(i) for i in np.unravel_index(int(np.argmax(err)), err.shape)))
    denom = max_finite_abs(ref)
    rel = worst / denom if denom > 0 else (0.0 if worst == 0 else float("inf"))
    return Deviation(worst, rel, where)


def verdict(dev: Deviation, limit: float) -> str:
    return "PASS" if dev.max_abs <= limit else "FAIL"
