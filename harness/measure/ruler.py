"""RULER's synthetic long-context tasks through lm-eval itself, against an arm's server.

The samples are generated once per run by lm-eval's own task code and kept under <run-dir>/ruler_data/, so both arms
get the same prompts (the data's hash says so). A sample is correct when every expected answer appears
(string_match_all 1.0), counted from lm-eval's per-sample log.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import yaml

from harness.config.arms import Arm, model_files
from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT
from harness.config.workloads import RulerWorkload
from harness.console import progress
from harness.measure.gsm8k import REQUEST_ERROR, lm_eval_version
from harness.records.schema import RulerCell

LOCAL_SUFFIX = "_harness"  # the evaluated task reads the run's data files: <lm-eval task>_harness
TASK_FILES = {"ruler_vt": "vt.yaml", "ruler_cwe": "cwe.yaml", "ruler_fwe": "fwe.yaml"}  # else <task>.yaml
OFFLINE_ENV = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
SEED = 0  # what simple_evaluate seeds `random` with before it builds the tasks (its default random_seed)
SEED_TRIES = 3  # draws of one task before its generation's IndexError stands (see generate)
NUMPY_SEED = 1234  # and numpy (ruler_fwe draws from numpy)
DATA_VERSION = 1  # bump when the kept fields change: a run directory's data is then regenerated


def tokenizer_dir(arm: Arm, w: RulerWorkload) -> Path:
    """The tokenizer RULER sizes its samples with: the workload's, else the arm's model files (its local directory,
    or a hub model's snapshot in the local Hugging Face cache). A ConfigError naming the arm when there is none."""
    if w.tokenizer:
        path = Path(w.tokenizer).expanduser()
        path = path if path.is_absolute() else REPO_ROOT / path
        where = f"workload {w.name}: tokenizer {w.tokenizer}"
    else:
        path = model_files(arm)
        where = f"arm {arm.name!r}: model {arm.model.path}"
        if path is None:
            raise ConfigError(f"{where} is not in the local Hugging Face cache: RULER needs its tokenizer to size "
                              f"the samples (download it there, or set `tokenizer:` in workload {w.name})")
    if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ConfigError(f"{where}: no tokenizer files in {path}; RULER needs the model's tokenizer to size its "
                          f"samples (set `tokenizer:` in workload {w.name} to a local tokenizer directory)")
    return path


def packaged_task_file(task: str) -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / "ruler" / TASK_FILES.get(task, f"{task}.yaml")


@dataclass(frozen=True)
class RulerData:
    """The run's RULER samples: per task its data file; where the task YAMLs are; the data's identity."""

    include_path: Path
    files: dict[str, Path]  # lm-eval task -> its JSONL of kept samples
    tokenizer: str
    sha: str  # over every kept sample: equal on both arms, and across runs with the same tokenizer and lm-eval
    counts: dict[str, dict[int, int]]  # task -> length -> samples kept (fewer than limit when RULER made fewer)

    def local_task(self, task: str) -> str:
        return task + LOCAL_SUFFIX


def kept_samples(docs: list[dict], lengths: list[int], limit: int) -> dict[int, list[dict]]:
    """Pure: the first `limit` samples of each length, in RULER's order."""
    out: dict[int, list[dict]] = {n: [] for n in lengths}
    for d in docs:
        rows = out.get(int(d["max_length"]))
        if rows is not None and len(rows) < limit:
            rows.append(d)
    return out


def data_key(w: RulerWorkload, tokenizer: Path) -> dict:
    return {"version": DATA_VERSION, "tasks": w.tasks, "max_seq_lengths": w.max_seq_lengths, "limit": w.limit,
            "tokenizer": str(tokenizer), "lm_eval": lm_eval_version()}


def write_task_yaml(out_dir: Path, task: str, data_file: Path) -> None:
    """lm-eval's packaged task (prompt, gen_prefix, generation budget, scoring), its data read from `data_file`."""
    cfg = {"include": str(packaged_task_file(task)), "task": task + LOCAL_SUFFIX, "custom_dataset": None,
           "dataset_path": "json", "dataset_name": None, "dataset_kwargs": {"data_files": {"test": str(data_file)}}}
    (out_dir / f"{task}{LOCAL_SUFFIX}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


# Each task's sampler, and the count lm-eval's task code asks it for (500, fixed): capped at the workload's limit.
SAMPLERS = (("niah_utils", "generate_samples"), ("vt_utils", "sys_vartrack_w_noise_random"),
            ("cwe_utils", "sys_word_pair_random"), ("fwe_utils", "sys_kwext"))


def capped(sampler, limit: int):
    """The sampler asked for at most `limit` samples: the first `limit` it would make from its seeded RNG (cost:
    docs/suites.md, "Measurement details, measured")."""
    def sample(*args, **kwargs):
        return sampler(*args, **{**kwargs, "num_samples": min(kwargs.get("num_samples", 500), limit)})
    return sample


@contextmanager
def fresh_samplers(limit: int):
    """lm-eval's RULER sampler modules loaded afresh (ruler_cwe shuffles with a module-level RNG: a second generation
    in one process would differ), by lm-eval's own loader, which a task YAML's !function then resolves to; each
    sampler capped at `limit` samples."""
    from lm_eval.tasks._yaml_loader import _load_module_with_cache

    with ExitStack() as stack:
        for module, name in SAMPLERS:
            sys.modules.pop(f"lm_eval.tasks.ruler.{module}", None)
            mod = _load_module_with_cache(packaged_task_file("ruler_vt").parent / f"{module}.py")
            stack.enter_context(mock.patch.object(mod, name, capped(getattr(mod, name), limit)))
        yield


def generate(w: RulerWorkload, tokenizer: Path) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """Each task generated on its own at every length, seeded as simple_evaluate seeds it; (samples, seed per task).
    ruler_vt's IndexError on colliding variable names is a fault of the draw: redrawn from the next seed."""
    import numpy as np
    from lm_eval.tasks import TaskManager

    out, seeds = {}, {}
    with mock.patch.dict(os.environ, OFFLINE_ENV):
        tm = TaskManager(include_path=str(packaged_task_file("ruler_vt").parent), include_defaults=False,
                         metadata={"tokenizer": str(tokenizer), "max_seq_lengths": list(w.max_seq_lengths)})
        for task in w.tasks:
            for seed in range(SEED, SEED + SEED_TRIES):
                random.seed(seed)
                np.random.seed(NUMPY_SEED + seed - SEED)
                try:
                    with fresh_samplers(w.limit):
                        out[task] = list(tm.load([task])["tasks"][task].dataset["test"])
                    seeds[task] = seed
                    break
                except IndexError:
                    if seed == SEED + SEED_TRIES - 1:
                        raise
    return out, seeds


def prepare_data(out_dir: Path, w: RulerWorkload, tokenizer: Path) -> RulerData:
    """The run's samples: generated by the first arm that needs them (under a file lock: a parallel run's workers
    share them), read back by every other."""
    from filelock import FileLock

    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "manifest.json"
    key = data_key(w, tokenizer)
    with FileLock(str(out_dir / ".lock")):
        known = json.loads(manifest.read_text()) if manifest.is_file() else None
        if known is None or known.get("key") != key:
            docs, seeds = generate(w, tokenizer)
            kept = {t: kept_samples(rows, w.max_seq_lengths, w.limit) for t, rows in docs.items()}
            h = hashlib.sha256()
            counts: dict[str, dict[int, int]] = {}
            for task, by_len in kept.items():
                path = out_dir / f"{task}.jsonl"
                with path.open("w") as f:
                    for n in w.max_seq_lengths:
                        for d in by_len[n]:
                            line = json.dumps(d, sort_keys=True)
                            h.update(line.encode())
                            f.write(line + "\n")
                counts[task] = {n: len(by_len[n]) for n in w.max_seq_lengths}
                write_task_yaml(out_dir, task, path)
            known = {"key": key, "sha": "sha256:" + h.hexdigest()[:16], "seeds": seeds,
                     "counts": {t: {str(n): c for n, c in by.items()} for t, by in counts.items()}}
            manifest.write_text(json.dumps(known, indent=1) + "\n")
    return RulerData(out_dir, {t: out_dir / f"{t}.jsonl" for t in w.tasks}, str(tokenizer), known["sha"],
                     {t: {int(n): c for n, c in by.items()} for t, by in known["counts"].items()})


@dataclass
class Evaluation:
    results: dict | None  # lm-eval's results dict; None when lm-eval itself failed
    samples: dict[str, list[dict]]  # lm-eval task (without the suffix) -> its per-sample log
    samples_path: Path | None
    wall_s: float
    request_errors: int
    dead: str | None
    error: str | None


def slim(sample: dict) -> dict:
    """A per-sample log row without the prompt text (up to a model's whole context, twice): its hashes stay."""
    doc = {k: v for k, v in (sample.get("doc") or {}).items() if k != "input"}
    return {k: v for k, v in sample.items() if k not in ("doc", "arguments")} | {"doc": doc}


def evaluate(lm, data: RulerData, out_dir: Path) -> Evaluation:
    """lm-eval's simple_evaluate on the run's data files; the per-sample log (prompts left out) kept under out_dir,
    whatever happens."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tasks = list(data.files)
    total = sum(sum(by.values()) for by in data.counts.values())
    t0 = time.monotonic()
    results, error = None, None
    try:
        with mock.patch.dict(os.environ, OFFLINE_ENV), progress.bar(f"{lm.model}: RULER answered", total,
                                                                    "samples") as lm.progress:
            tm = TaskManager(include_path=str(data.include_path), include_defaults=False)
            results = simple_evaluate(model=lm, tasks=[data.local_task(t) for t in tasks], log_samples=True,
                                      task_manager=tm, bootstrap_iters=0, torch_random_seed=None)
    except Exception as exc:  # noqa: BLE001 - recorded as the run's failure, with what was gathered
        error = f"lm-eval failed: {type(exc).__name__}: {exc}"
    wall = time.monotonic() - t0
    logged = (results or {}).get("samples", {})
    samples = {t: [slim(s) for s in logged.get(data.local_task(t), [])] for t in tasks}
    path = None
    if any(samples.values()):
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "samples_ruler.jsonl"
        with path.open("w") as f:
            for task, rows in samples.items():
                for s in rows:
                    f.write(json.dumps({"task": task, **s}, default=str) + "\n")
    return Evaluation(results, samples, path, wall, lm.request_errors, lm.dead, error)


def sample_key(task: str, length: int, doc_id: int) -> str:
    """A sample's name in RulerRecord.per_sample: the same on both arms for the same prompt."""
    return f"{task}@{length}#{doc_id}"


def sample_score(sample: dict) -> tuple[int, float]:
    """(length, string_match_all score) of one logged sample: lm-eval's metric under the sample's own length."""
    length = int(sample["doc"]["max_length"])
    return length, float(sample[str(length)])


@dataclass(frozen=True)
class Scored:
    cells: list[RulerCell]
    per_sample: dict[str, bool]  # sample_key -> every expected answer found (the paired gate's input)
    request_errors: int


def score(samples: dict[str, list[dict]], lengths: list[int]) -> Scored:
    """Pure: per task and length, Correct/N and the mean score, counted from the per-sample logs."""
    cells, per_sample, errors = [], {}, 0
    for task, rows in samples.items():
        by_len: dict[int, list[tuple[float, bool]]] = {n: [] for n in lengths}
        for s in rows:
            length, value = sample_score(s)
            failed = (s.get("resps") or [[""]])[0][0] == REQUEST_ERROR
            errors += failed
            by_len.setdefault(length, []).append((value, failed))
            per_sample[sample_key(task, length, int(s["doc_id"]))] = value >= 1.0
        for n, vals in by_len.items():
            cells.append(RulerCell(task=task, length=n, n=len(vals), correct=sum(v >= 1.0 for v, _ in vals),
                                   score=sum(v for v, _ in vals) / len(vals) if vals else None,
                                   request_errors=sum(f for _, f in vals)))
    return Scored(cells, per_sample, errors)


def aggregate_scores(results: dict | None, tasks: list[str], lengths: list[int]) -> dict[tuple[str, int], float]:
    """lm-eval's own aggregate per task and length (where it computed one): the cross-check of score()."""
    out = {}
    for t in tasks:
        row = ((results or {}).get("results") or {}).get(t + LOCAL_SUFFIX, {})
        for n in lengths:
            v = row.get(f"{n},none")
            if isinstance(v, (int, float)) and v >= 0:
                out[(t, n)] = float(v)
    return out


def ruler_fields(ev: Evaluation, data: RulerData, w: RulerWorkload) -> dict:
    """A RulerRecord's fields from one evaluation."""
    scored = score(ev.samples, w.max_seq_lengths)
    theirs = aggregate_scores(ev.results, list(w.tasks), w.max_seq_lengths)
    cells = [c.model_copy(update={"lm_eval_score": theirs.get((c.task, c.length))}) for c in scored.cells]
    reason = ev.dead or ev.error
    return {"workload": w.name, "tasks": list(w.tasks), "max_seq_lengths": list(w.max_seq_lengths),
            "limit": w.limit, "tokenizer": data.tokenizer, "data_sha": data.sha, "lm_eval_version": lm_eval_version(),
            "n": len(scored.per_sample), "cells": cells, "request_errors": ev.request_errors,
            "status": "aborted" if reason else "complete", "reason": reason, "wall_s": round(ev.wall_s, 2),
            "num_concurrent": w.num_concurrent, "samples_path": str(ev.samples_path) if ev.samples_path else None,
            "per_sample": scored.per_sample}
