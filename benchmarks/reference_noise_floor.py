"""Where a run's reference-check deviations sit: token divergences by the reference's own top-2 gap, and the
chosen-token drift distribution, per comparison file; then each check re-judged under given limits.

Reads only the `*_comparisons.jsonl` files a run wrote (reports/<run>/<arm>/), so it works on a run brought back
from a GPU machine. Comparing a candidate-vs-reference file with the same arm's graphs-vs-eager file separates a
real deviation from the kernel noise floor of the model and dtype.

    python benchmarks/reference_noise_floor.py reports/<run> [--drift-limit 0.25 --tie-gap 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.records.schema import RequestComparison  # noqa: E402
from harness.refcheck.judging.compare import judge_comparisons  # noqa: E402


def load(path: Path) -> list[RequestComparison]:
    return [RequestComparison.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def describe(cs: list[RequestComparison]) -> str:
    gaps = sorted(round(c.reference_gap_at_divergence, 4) for c in cs
                  if not c.exact and c.reference_gap_at_divergence is not None)
    drifts = sorted(c.max_drift for c in cs if c.max_drift is not None)
    quant = (f"drift p50 {statistics.median(drifts):.3f} p90 {drifts[int(0.9 * (len(drifts) - 1))]:.3f} "
             f"max {drifts[-1]:.3f}") if drifts else "no drift"
    return f"{len(cs)} requests, {sum(c.exact for c in cs)} exact; divergences at reference gaps {gaps}; {quant}"


def positions_over(cs: list[RequestComparison], limit: float, top: int = 5) -> str:
    """Per-position deltas: how many scored positions drift past `limit`, and the largest, by request and position
    (a few large positions point at ties or rounding of large logits; many small ones at a shift)."""
    scored = [(d, c.request, i) for c in cs for i, d in enumerate(c.deltas) if d is not None]
    if not scored:
        return "no per-position deltas recorded"
    over = sorted((x for x in scored if x[0] > limit), reverse=True)
    nonzero = sum(d > 0 for d, _, _ in scored)
    worst = ", ".join(f"{d:.3f} ({r} @ {i})" for d, r, i in over[:top])
    return (f"{len(scored)} positions, {nonzero} nonzero, {len(over)} over {limit:g}"
            + (f": {worst}" if over else ""))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--drift-limit", type=float, default=1e-2)
    p.add_argument("--tie-gap", type=float, default=0.0)
    args = p.parse_args(argv)
    files = sorted(args.run_dir.glob("*/*_comparisons.jsonl"))
    if not files:
        print(f"no *_comparisons.jsonl under {args.run_dir}/<arm>/", file=sys.stderr)
        return 2
    for f in files:
        cs = load(f)
        v = judge_comparisons(f.stem, cs, args.drift_limit, args.tie_gap)
        print(f"{f.parent.name}/{f.name}: {describe(cs)}")
        print(f"  positions: {positions_over(cs, args.drift_limit)}")
        print(f"  under drift_limit {args.drift_limit:g}, tie_gap {args.tie_gap:g}: "
              f"{'PASS' if v.passed else 'FAIL'} ({v.detail})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
