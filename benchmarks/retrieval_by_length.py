"""Needle retrieval per prompt length, measured on real servers: the long_context grid's cold copy prompts sent to
each arm (one server at a time, started by the harness's own launch code), greedy accuracy per length and depth,
and whether the arms' greedy outputs are identical.

    .venv/bin/python benchmarks/retrieval_by_length.py                       # cpu-ref, then cpu-smoke
    .venv/bin/python benchmarks/retrieval_by_length.py --arms cpu-ref --workload long_context_cpu --json out.json

The prompts are exactly the long_context suite's (refcheck/prompts/long_context.py): needles from the model dir's
tiny_model.json, filler from the arm's token space. Accuracy is the fraction of the span after the cue reproduced in
place (harness/tinymodel/copytask.copy_accuracy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.config.arms import load_arm  # noqa: E402
from harness.config.workloads import LongContextWorkload, load_workload  # noqa: E402
from harness.measure.generation import Sampling, generate_batch  # noqa: E402
from harness.measure.prompts import token_space  # noqa: E402
from harness.refcheck.prompts.long_context import build_long_context_prompts, read_needle_tokens  # noqa: E402
from harness.serve.launch import launch  # noqa: E402
from harness.tinymodel.copytask import copy_accuracy  # noqa: E402


def run_arm(name: str, workload: str, work: Path) -> tuple[dict, dict[str, list[int]], str]:
    """({cell id: accuracy}, {cell id: output ids}, needle source) for one arm; its server is stopped after."""
    arm = load_arm(name)
    w = load_workload(workload, kind=LongContextWorkload)
    published = read_needle_tokens(arm.model.local_dir() if arm.model.source == "local" else None)
    prompts = build_long_context_prompts(w, token_space(arm, w), published)
    live = launch(arm, work / name)
    try:
        cells = prompts.all()
        outs = asyncio.run(generate_batch(live.info.base_url, arm.model.served_name, [c.tokens for c in cells],
                                          Sampling(w.output_tokens, 1), arm.timeouts.request_s))
    finally:
        live.server.stop()
    acc = {c.id: copy_accuracy(g.token_ids, c.expected) for c, g in zip(cells, outs, strict=True)}
    return acc, {c.id: g.token_ids for c, g in zip(cells, outs, strict=True)}, prompts.needle_source


def by_length(acc: dict[str, float]) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for cell, a in acc.items():
        groups.setdefault(cell.split("-")[0].lstrip("L"), []).append(a)
    return {n: round(sum(v) / len(v), 4) for n, v in sorted(groups.items(), key=lambda kv: int(kv[0]))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arms", nargs="+", default=["cpu-ref", "cpu-smoke"])
    p.add_argument("--workload", default="long_context_cpu")
    p.add_argument("--json", type=Path, help="write the per-cell results here")
    args = p.parse_args(argv)
    results, outputs = {}, {}
    with tempfile.TemporaryDirectory(prefix="retrieval-") as tmp:
        for name in args.arms:
            acc, outputs[name], source = run_arm(name, args.workload, Path(tmp))
            results[name] = {"needles": source, "per_cell": acc, "per_length": by_length(acc)}
            print(f"{name}: needles from {source}")
            for cell, a in acc.items():
                print(f"  {cell:16s} {a:.3f}")
            print(f"  per length: {results[name]['per_length']}")
    first = args.arms[0]
    for name in args.arms[1:]:
        same = sum(outputs[name][c] == outputs[first][c] for c in outputs[first])
        results[name]["identical_to_" + first] = f"{same}/{len(outputs[first])}"
        print(f"{name} vs {first}: greedy outputs identical on {same}/{len(outputs[first])} prompts")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
