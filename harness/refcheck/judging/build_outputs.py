"""A build's own outputs, stored in its run (<run>/<arm>/build_outputs.json), and a later build's compared with them:
build vs build (`qualify --baseline-build`, docs/gates.md). The candidate's outputs of the reference checks' prompt
set are captured as a reference's are (one prompt at a time, its own cache salt), so two builds of one arm are
compared under the same conditions; the baseline build plays the reference's role (refcheck/judging/compare.py).

The file says what its outputs depend on besides the build: the model's hashes, the prompts, the sampling and the
arm's configuration without its build pin (launcher.python is volatile already; server.env PYTHONPATH picks a scratch
or wheel tree). Another model or configuration is another arm, not another build: refused before anything runs."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path

from harness.config.arms import VOLATILE_ARM_FIELDS, Arm
from harness.config.errors import ConfigError
from harness.measure.generation import Generation, Sampling
from harness.records.schema import RequestComparison
from harness.refcheck.judging.check import ReferenceCheck
from harness.refcheck.judging.compare import compare_outputs
from harness.refcheck.prompts.check_prompts import CheckPrompt, prompt_sha
from harness.refcheck.store import reference_store as store

FORMAT = 1
FILE = "build_outputs.json"
CHECK = "build_outputs"  # the record's check name
# the reference checks' calibrated check whose limits judge it: same prompts, generations compared token by token
LIMITS_FROM = "prefix_reuse"
PIN_ENV = "PYTHONPATH"  # the server.env key that selects another vllm tree (length_faults' scratch, a wheel's dir)


def outputs_path(run_dir: Path, arm: str) -> Path:
    return Path(run_dir) / arm / FILE


def unpinned_config_sha(arm: Arm) -> str:
    """The arm's configuration without what picks its build: two builds of one arm share it."""
    dump = arm.model_dump(mode="json", exclude=VOLATILE_ARM_FIELDS)
    for key in ("port", "host"):
        dump["server"].pop(key, None)
    dump["server"]["env"] = {k: v for k, v in dump["server"].get("env", {}).items() if k != PIN_ENV}
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()[:16]


def outputs_meta(arm: Arm, identity: dict, prompts_sha: str, sampling: Sampling, build: dict) -> dict:
    return {"arm": arm.name, "model": identity, "config_sha": unpinned_config_sha(arm), "prompt_set_sha": prompts_sha,
            "sampling": {"max_tokens": sampling.max_tokens, "top_logprobs": sampling.top_logprobs,
                         "capture": "one at a time, own cache salt"}, "build": build}


def save_outputs(path: Path, meta: dict, prompts: list[CheckPrompt], outputs: dict[str, Generation]) -> Path:
    doc = {"format": FORMAT, "meta": meta, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "outputs": {p.id: {"prompt_sha": prompt_sha(p.tokens), **outputs[p.id].to_json()} for p in prompts}}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    tmp.replace(path)
    return path


def read_doc(path: Path) -> dict:
    """The stored file; a ConfigError naming it when it cannot be read as one."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: no stored build outputs ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("meta"), dict):
        raise ConfigError(f"{path}: not a build outputs file of format {FORMAT} (field format/meta)")
    return doc


def meta_mismatch(stored: dict, arm: Arm, identity: dict) -> str | None:
    """Why the stored outputs are not of this arm's model and configuration (None: they are): another arm or model
    is no baseline build."""
    if stored.get("arm") != arm.name:
        return f"they are arm {stored.get('arm')!r}'s, not {arm.name!r}'s"
    if stored.get("model") != identity:
        parts = ", ".join(f"{k} {stored.get('model', {}).get(k)} vs {identity.get(k)}"
                          for k in sorted(identity.keys() | stored.get("model", {}).keys())
                          if stored.get("model", {}).get(k) != identity.get(k))
        return f"they are of another model ({parts})"
    if stored.get("config_sha") != unpinned_config_sha(arm):
        return (f"arm {arm.name!r}'s configuration changed since (config sha {stored.get('config_sha')} vs "
                f"{unpinned_config_sha(arm)}; only launcher.python and server.env {PIN_ENV} may pick another build)")
    return None


def stored_generations(doc: dict, prompts: list[CheckPrompt]) -> tuple[dict[str, Generation], list[str]]:
    """The baseline's output for every prompt of this run's set, and why any prompt has none (another prompt set)."""
    outputs, problems = store.stored_generations(doc.get("outputs", {}), prompts)
    return outputs, [f"baseline build: {p}" for p in problems]


def compare_builds(prompts: list[CheckPrompt], candidate: dict[str, Generation],
                   baseline: dict[str, Generation]) -> list[RequestComparison]:
    """Each prompt's candidate output against the baseline build's, the baseline in the reference's place."""
    return [compare_outputs(p.id, len(p.tokens), candidate[p.id], baseline[p.id], p.group)
            for p in prompts if p.id in candidate and p.id in baseline]


def build_check(calibrated: ReferenceCheck) -> ReferenceCheck:
    """The check judged by LIMITS_FROM's limits: a calibration's drift limit and tie gap where one is stored (no floor
    of its own to pair with: not required), else gates.yaml's, "not calibrated" failing under require_floor."""
    limits = calibrated.limits
    required = limits.require_floor and limits.calibration is None
    return ReferenceCheck(replace(limits, check=CHECK, require_floor=required), calibrated.degeneration)


def floor_line(calibrated: ReferenceCheck) -> dict:
    """The record's floor field where a calibration judged it (else the floor verdict's own sentence stands)."""
    limits = calibrated.limits
    return {"floor": f"no floor of its own: judged by {LIMITS_FROM}'s calibrated limits"} if limits.calibration else {}


def power_line(comparisons: list[RequestComparison], drift_limit: float, tie_gap: float) -> str:
    """What the comparison could see: how many outputs and tokens, at which limits."""
    tokens = sum(c.reference_tokens for c in comparisons)
    return (f"{len(comparisons)} outputs, {tokens} generated tokens compared with the baseline build's: any token "
            f"differing outside a tie gap of {tie_gap:g} or a chosen-token logprob moving more than {drift_limit:g} "
            "fails")
