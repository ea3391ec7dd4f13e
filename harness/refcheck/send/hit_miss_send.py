"""Cache hit vs miss on a live server (I/O, issue 57 item 6): the cached probes sent cold, and the reference build's
own hit-vs-miss noise measured and stored.

    python -m harness.refcheck.send.hit_miss_send --reference cpu-ref --candidate cpu-smoke [--run-dir DIR]

launches the reference arm with prefix caching on (an equivalent perturbation: refcheck/store/self_noise.py EQUIVALENT),
sends the warm prompt and each cached probe of the candidate's prompt set under one cache salt, then each probe cold
under its own, and stores the pairs under the reference outputs' noise key (`<store>/hit_miss/<reference>-<key>.json`),
which prefix_reuse reads (harness/refcheck/judging/hit_miss.py judges).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.measure.generation import Generation, Sampling
from harness.records.schema import RequestComparison
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.prompts.check_prompts import CheckPrompt, CheckPrompts
from harness.refcheck.send.batches import send
from harness.serve.launch import LiveServer


def cached_probes(prompts: CheckPrompts) -> list[CheckPrompt]:
    """The probes hit vs miss compares: the block-aligned ones that share a prefix with the warm prompt."""
    return [p for p in prompts.probes if p.id.startswith("aligned") and p.shared_tokens]


def send_cold(live: LiveServer, probes: list[CheckPrompt], sampling: Sampling, salt: str) -> dict[str, Generation]:
    """Each probe alone under its own cache salt: computed from scratch (probes share prefixes with each other)."""
    return {p.id: send(live, [p], sampling, cache_salt=f"{salt}-cold-{p.id}")[0] for p in probes}


def pairs(probes: list[CheckPrompt], hit: dict[str, Generation],
          cold: dict[str, Generation]) -> list[RequestComparison]:
    """Each probe's cached output against its cold one (the cold output plays the reference: its gap is read)."""
    return [compare_outputs(p.id, len(p.tokens), hit[p.id], cold[p.id], p.group) for p in probes]


def measure_noise(live: LiveServer, prompts: CheckPrompts, sampling: Sampling) -> list[RequestComparison]:
    """The server's hit-vs-miss pairs: the warm prompt, then each cached probe alone under the same salt (a hit of
    its shared part), then each cold."""
    salt = "hit-miss-noise"
    send(live, [prompts.warm], sampling, cache_salt=salt)
    probes = cached_probes(prompts)
    hit = {p.id: send(live, [p], sampling, cache_salt=salt)[0] for p in probes}
    return pairs(probes, hit, send_cold(live, probes, sampling, salt))


def noise_path(directory: Path, reference: str, noise_key: str) -> Path:
    return directory / "hit_miss" / f"{reference}-{noise_key}.json"


def save_noise(path: Path, comparisons: list[RequestComparison], measured_on: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"measured_on": measured_on,
                                "comparisons": [c.model_dump(mode="json") for c in comparisons]}) + "\n")


def load_noise(path: Path) -> tuple[list[RequestComparison], str] | None:
    """The stored pairs and where they were measured; None where nothing is stored."""
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    return [RequestComparison.model_validate(c) for c in doc["comparisons"]], doc["measured_on"]


@dataclass(frozen=True)
class NoiseTarget:
    """What a measurement of `reference`'s hit-vs-miss noise sends and where prefix_reuse looks for it: the
    candidate's reference-check prompts, and the reference outputs' noise key they are stored under."""

    reference: str
    prompts: CheckPrompts
    sampling: Sampling
    noise_key: str
    digest: str  # the reference outputs' key (a run's records name it: reference_key)
    vllm_version: str


def noise_target(reference: str, candidate: str) -> NoiseTarget:
    """As a run of `candidate` against `reference` keys its reference outputs (refcheck/store/reference_store.py
    make_key)."""
    from harness.config.arms import load_arm
    from harness.config.paths import server_python
    from harness.config.workloads import ReferenceChecksWorkload, load_workload, workload_for
    from harness.measure.prompts import token_space
    from harness.refcheck.prompts.check_prompts import build_check_prompts
    from harness.refcheck.store.reference_store import installed_vllm_version, make_key, model_identity

    ref, cand = load_arm(reference), load_arm(candidate)
    w = load_workload(workload_for(cand, "reference_checks"), kind=ReferenceChecksWorkload)
    prompts, sampling = build_check_prompts(w, token_space(cand, w)), Sampling(w.output_tokens, w.top_logprobs)
    version = installed_vllm_version(ref.launcher.python or server_python())
    key = make_key(ref, model_identity(ref), prompts, sampling, version)
    return NoiseTarget(reference, prompts, sampling, key.noise_key, key.digest, version)


def main(argv: list[str] | None = None) -> int:
    from harness.config.arms import load_arm
    from harness.config.errors import HarnessError
    from harness.config.paths import REPORTS_DIR
    from harness.refcheck.store.reference_store import reference_dir
    from harness.serve.launch import launch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True)
    ap.add_argument("--candidate", required=True, help="whose prompt set (reference_checks workload) to measure")
    ap.add_argument("--run-dir", type=Path, default=REPORTS_DIR / "hit-miss")
    args = ap.parse_args(argv)
    try:
        target = noise_target(args.reference, args.candidate)
        prompts, sampling, key, version = target.prompts, target.sampling, target.noise_key, target.vllm_version
        ref = load_arm(args.reference)
        live = launch(load_arm(args.reference, ["server.enable_prefix_caching=true"]), args.run_dir / ref.name)
        try:
            noise = measure_noise(live, prompts, sampling)
        finally:
            live.server.stop()
    except (HarnessError, OSError) as exc:
        print(f"hit_miss_send: {exc}", file=sys.stderr)
        return 2
    path = noise_path(reference_dir(), ref.name, key)
    save_noise(path, noise, f"{ref.name} with prefix caching on, vLLM {version}")
    print(f"hit-vs-miss noise of {ref.name} ({len(noise)} probes, max drift "
          f"{max((c.max_drift or 0.0 for c in noise), default=0.0):.3g}) stored: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
