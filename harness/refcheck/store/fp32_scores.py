"""Float32 teacher-forced scores of a reference's stored outputs, kept beside them in the reference store.

`<store>/<arm>-<key>.fp32.json` holds, per prompt id, transformers' float32 logprob of every token the reference
generated (harness/tinymodel/teacher_score.py, run in the server environment on CPU), keyed like the outputs file
(its key digest, each prompt's sha and the tokens scored), so they are computed once per reference key and never
reused for other tokens. Only generated tiny models (tiny_model.json beside the weights) are scored: a real model's
float32 pass is not the harness's to run.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT
from harness.measure.prompts import token_space
from harness.records.manifest import RunManifest
from harness.records.started import recorded_workload
from harness.refcheck.prompts.check_prompts import CheckPrompt, build_check_prompts, prompt_sha

FP32_FORMAT = 1
SCORE_TIMEOUT_S = 1800


def reference_file(directory: Path, arm: str, key: str) -> Path:
    """The outputs file of reference arm `arm` under key digest `key` (refcheck.store ReferenceKey.path)."""
    return directory / f"{arm}-{key}.json"


def scores_file(outputs_file: Path) -> Path:
    return outputs_file.with_name(outputs_file.stem + ".fp32.json")


def tokens_sha(tokens: list[int]) -> str:
    return hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]


def generated_model(model_dir: Path | None) -> bool:
    """A model the harness generated (harness/tinymodel): its float32 pass is cheap and its code is transformers'."""
    return model_dir is not None and (model_dir / "tiny_model.json").is_file()


def run_check_prompts(candidate: Arm, run_dir: Path, manifest: RunManifest) -> list[CheckPrompt]:
    """The reference-check prompts a finished run of `candidate` sent, rebuilt from the workload its run.json
    recorded (the same every repeat of a calibration: the order seed changes only who is sent with whom)."""
    workload = recorded_workload(manifest, candidate.name, "reference_checks", run_dir / "run.json")
    return build_check_prompts(workload, token_space(candidate, workload)).all()


def read_outputs(outputs_file: Path) -> dict[str, dict]:
    """prompt id -> the stored entry (prompt_sha, token_ids, logprobs, top); a ConfigError naming the file."""
    try:
        return json.loads(outputs_file.read_text())["outputs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{outputs_file}: the reference outputs cannot be read ({exc.__class__.__name__}): the "
                          "float32 anchor scores them; recapture with --refresh-reference") from None


def job(prompts: list[CheckPrompt], outputs: dict[str, dict]) -> dict[str, dict]:
    """id -> {prompt, tokens, prompt_sha, tokens_sha}: what is scored; a ConfigError where the stored outputs are of
    other prompts."""
    out = {}
    for p in prompts:
        entry = outputs.get(p.id)
        if entry is None or entry.get("prompt_sha") != prompt_sha(p.tokens):
            raise ConfigError(f"reference outputs: prompt {p.id} is missing or of other tokens than the run's prompts: "
                              "the float32 anchor scores the reference's own continuations of the same prompts")
        tokens = list(entry["token_ids"])
        out[p.id] = {"prompt": p.tokens, "tokens": tokens, "prompt_sha": prompt_sha(p.tokens),
                     "tokens_sha": tokens_sha(tokens)}
    return out


def load_scores(path: Path, key: str, requests: dict[str, dict]) -> dict[str, list[float]] | None:
    """The stored scores when the file is of this key and scored these very tokens; None otherwise (scored again)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FP32_FORMAT or doc.get("key") != key:
        return None
    scored = doc.get("requests", {})
    if any(scored.get(i, {}).get("tokens_sha") != r["tokens_sha"] or scored[i].get("prompt_sha") != r["prompt_sha"]
           for i, r in requests.items()):
        return None
    return {i: scored[i]["logprobs"] for i in requests}


def score(python: str, model_dir: Path, requests: dict[str, dict]) -> dict:
    """Run the scorer in the server environment; its output document. A ConfigError with its stderr when it fails."""
    with tempfile.TemporaryDirectory(prefix="fp32-") as tmp:
        job_file, out = Path(tmp) / "job.json", Path(tmp) / "scores.json"
        job_file.write_text(json.dumps({"requests": [{"id": i, "prompt": r["prompt"], "tokens": r["tokens"]}
                                                     for i, r in requests.items()]}))
        proc = subprocess.run([python, "-m", "harness.tinymodel.teacher_score", "--model", str(model_dir),
                               "--job", str(job_file), "--out", str(out)],
                              capture_output=True, text=True, timeout=SCORE_TIMEOUT_S,
                              cwd=REPO_ROOT)  # where `python -m harness...` finds the package
        if proc.returncode != 0 or not out.is_file():
            raise ConfigError(f"the float32 scorer failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
        return json.loads(out.read_text())


def fp32_scores(outputs_file: Path, key: str, prompts: list[CheckPrompt], model_dir: Path,
                python: str) -> dict[str, list[float]]:
    """id -> float32 logprobs of the reference's tokens: from the store when keyed alike, else scored and stored."""
    requests = job(prompts, read_outputs(outputs_file))
    path = scores_file(outputs_file)
    stored = load_scores(path, key, requests)
    if stored is not None:
        return stored
    doc = score(python, model_dir, requests)
    saved = {"format": FP32_FORMAT, "key": key, "dtype": doc["dtype"], "attention": doc.get("attention"),
             "torch": doc["torch"],
             "transformers": doc["transformers"], "model_dir": str(model_dir),
             "requests": {i: {"prompt_sha": r["prompt_sha"], "tokens_sha": r["tokens_sha"],
                              "logprobs": doc["scores"][i]} for i, r in requests.items()}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(saved) + "\n")
    tmp.replace(path)
    return {i: saved["requests"][i]["logprobs"] for i in requests}
