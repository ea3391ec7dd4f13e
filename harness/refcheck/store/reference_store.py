"""Reference outputs on disk: one JSON file per key (model identity, prompt set, sampling, vLLM version, arm config).

A nightly DCP run reuses the stored TP outputs instead of relaunching the reference arm when nothing that could
change them has changed. A file that does not parse, or whose metadata or prompts differ from what the key
promises, is an error naming the difference; it is never silently reused or overwritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness import __version__
from harness.config.arms import VOLATILE_ARM_FIELDS, Arm
from harness.config.errors import HarnessError
from harness.config.paths import REPORTS_DIR
from harness.measure.generation import Generation, Sampling
from harness.probes.ask import run_probe
from harness.records.migrations import FormatError, StoredFormat, upgrade
from harness.refcheck.prompts.check_prompts import CheckPrompt, CheckPrompts, prompt_sha

STORE_FORMAT = 1
# Each file names its format (records.migrations); none is older yet. A stored file is a capture: recapturing
# (--refresh-reference) is the remedy where no step leads to today's format.
REFERENCE_FILE = StoredFormat("reference file", "format", STORE_FORMAT, remedy="recapture it")
FULL_HASH_LIMIT = 512 * 2**20  # larger weight files: size + first and last MiB (a 1 TB checkpoint is not re-read)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "tiktoken.model")
# VOLATILE_ARM_FIELDS (config.arms): fields of an arm that cannot change its outputs; leaving them out lets a renamed
# or re-timed arm reuse its store.


class ReferenceStoreError(HarnessError):
    """A stored reference file is corrupt or does not match its key."""


def reference_dir() -> Path:
    return Path(os.environ.get("HARNESS_REFERENCE_DIR", REPORTS_DIR / "references"))


def file_sha(path: Path) -> str:
    h = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as f:
        if size <= FULL_HASH_LIMIT:
            for chunk in iter(lambda: f.read(2**20), b""):
                h.update(chunk)
        else:
            h.update(f"sampled:{size}".encode())
            h.update(f.read(2**20))
            f.seek(size - 2**20)
            h.update(f.read(2**20))
    return h.hexdigest()[:16]


def model_identity(arm: Arm) -> dict[str, str]:
    """Weights, tokenizer and config hashes of a local model; the hub id for a hub model."""
    if arm.model.source == "hub":
        return {"hub_id": arm.model.path}
    d = arm.model.local_dir()  # the arm loader has checked that it exists and holds config.json
    weights = sorted(p for p in d.iterdir() if p.suffix in (".safetensors", ".bin", ".pt"))
    h = hashlib.sha256()
    for p in weights:
        h.update(f"{p.name}:{file_sha(p)}".encode())
    tok = hashlib.sha256()
    for name in TOKENIZER_FILES:
        if (d / name).is_file():
            tok.update(f"{name}:{file_sha(d / name)}".encode())
    return {"config_sha": file_sha(d / "config.json"), "weights_sha": h.hexdigest()[:16],
            "tokenizer_sha": tok.hexdigest()[:16]}


def model_difference(cand: Arm, cand_id: dict, ref: Arm, ref_id: dict) -> str | None:
    """None when both arms serve the same model; else which parts differ."""
    differ = [k for k in sorted(cand_id.keys() | ref_id.keys()) if cand_id.get(k) != ref_id.get(k)]
    if not differ:
        return None
    parts = ", ".join(f"{k} {cand_id.get(k)} vs {ref_id.get(k)}" for k in differ)
    return (f"arm {cand.name!r} ({cand.model.path}) and its reference {ref.name!r} ({ref.model.path}) serve "
            f"different models ({parts}): their outputs cannot be compared. Point both arms at the same weights "
            "and tokenizer")


def arm_config_sha(arm: Arm) -> str:
    dump = arm.model_dump(mode="json", exclude=VOLATILE_ARM_FIELDS)
    dump["server"].pop("port", None)
    dump["server"].pop("host", None)
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()[:16]


def installed_vllm_version(python: str) -> str:
    """From package metadata in the server environment (probe `version`): no vLLM import (seconds, not 15 s)."""
    try:
        out = run_probe(python, "version", timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return out or "unknown"


def noise_digest(meta: dict) -> str:
    """A digest of what sets a comparison's noise (model identity, prompts, sampling, the reference's config): no
    vLLM version of either arm in it."""
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ReferenceKey:
    meta: dict  # everything the outputs depend on

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.meta, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def noise_key(self) -> str:
        """The key without the reference's vLLM version: what a calibration of a candidate against these outputs is
        keyed by (refcheck/store/floor_store.py), so outputs recaptured on a new build find the last calibration."""
        return noise_digest({k: v for k, v in self.meta.items() if k != "vllm_version"})

    def path(self, arm: str, directory: Path) -> Path:
        return directory / f"{arm}-{self.digest}.json"


def make_key(arm: Arm, identity: dict, prompts: CheckPrompts, sampling: Sampling, vllm_version: str) -> ReferenceKey:
    return ReferenceKey({"model": identity, "prompt_set_sha": prompts.fingerprint(),
                         "sampling": {"max_tokens": sampling.max_tokens, "top_logprobs": sampling.top_logprobs,
                                      "temperature": 0.0, "ignore_eos": True,
                                      "capture": "one at a time, own cache salt"},
                         "vllm_version": vllm_version, "arm_config_sha": arm_config_sha(arm)})


@dataclass(frozen=True)
class StoredOutputs:
    arm: str
    key: str
    path: Path
    outputs: dict[str, Generation]
    reused: bool
    noise_key: str = ""  # ReferenceKey.noise_key of the outputs: the calibration's key ("": none, no outputs)


def save(key: ReferenceKey, arm: str, prompts: CheckPrompts, outputs: dict[str, Generation],
         directory: Path) -> Path:
    path = key.path(arm, directory)
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"format": STORE_FORMAT, "key": key.digest, "meta": key.meta, "reference_arm": arm,
           "harness_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "outputs": {p.id: {"prompt_sha": prompt_sha(p.tokens), **outputs[p.id].to_json()} for p in prompts.all()}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    tmp.replace(path)  # a crash mid-write leaves no half file under the key's name
    return path


def stored_generations(stored: dict, prompts: list[CheckPrompt]) -> tuple[dict[str, Generation], list[str]]:
    """A stored file's output for every prompt, and why any prompt has none (missing, other tokens, unreadable)."""
    problems, outputs = [], {}
    for p in prompts:
        entry = stored.get(p.id)
        if not isinstance(entry, dict):
            problems.append(f"prompt {p.id} missing")
        elif entry.get("prompt_sha") != prompt_sha(p.tokens):
            problems.append(f"prompt {p.id} has other tokens (sha {entry.get('prompt_sha')} vs {prompt_sha(p.tokens)})")
        else:
            try:
                outputs[p.id] = Generation.from_json(entry)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(f"prompt {p.id} output unreadable ({exc!r})")
    return outputs, problems


def load(key: ReferenceKey, arm: str, prompts: CheckPrompts, directory: Path) -> StoredOutputs | None:
    """The stored outputs for this key, None when there are none; ReferenceStoreError when the file is bad."""
    path = key.path(arm, directory)
    if not path.is_file():
        return None
    fix = f"delete {path} or run with --refresh-reference"
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReferenceStoreError(f"reference file {path} is corrupt ({exc}); {fix}") from None
    if not isinstance(doc, dict):
        raise ReferenceStoreError(f"reference file {path} is no JSON object; {fix}")
    try:
        doc = upgrade(doc, REFERENCE_FILE)
    except FormatError as exc:
        raise ReferenceStoreError(f"reference file {path}: {exc}; {fix}") from None
    differ = sorted(k for k in key.meta.keys() | doc.get("meta", {}).keys() if key.meta.get(k) != doc["meta"].get(k))
    if differ:
        shown = "; ".join(f"{k}: stored {doc['meta'].get(k)!r}, expected {key.meta.get(k)!r}" for k in differ)
        raise ReferenceStoreError(f"reference file {path} does not match its key ({shown}); {fix}")
    outputs, problems = stored_generations(doc.get("outputs", {}), prompts.all())
    if problems:
        raise ReferenceStoreError(f"reference file {path}: " + "; ".join(problems[:5])
                                  + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "") + f"; {fix}")
    return StoredOutputs(arm, key.digest, path, outputs, reused=True, noise_key=key.noise_key)
