"""GSM8K through lm-eval itself: task selection (offline JSON files or lm-eval's own hub task), an lm-eval
model that survives request errors and counts them, and per-question scoring read from lm-eval's samples.

Offline, the task YAML is lm-eval's packaged gsm8k.yaml with `dataset_path: json` and data_files pointing
at the local train/test JSONL (never copied into the repo).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import yaml

from harness.config.errors import ConfigError
from harness.config.paths import gsm8k_dir
from harness.config.workloads import Gsm8kWorkload
from harness.console import progress
from harness.records.schema import FilterScore, per_question_of

TASK = "gsm8k"
LOCAL_TASK = "gsm8k_local"
FILTERS = ("strict-match", "flexible-extract")
REQUEST_ERROR = "[harness: request failed]"  # the response recorded for a request that failed after retries
INVALID = "[invalid]"  # lm-eval's regex filter fallback when no number is found


@dataclass(frozen=True)
class TaskSource:
    task: str
    include_path: Path | None  # folder holding the offline task YAML; None for lm-eval's own task
    data_files: dict[str, str] | None
    env: dict[str, str] = field(default_factory=dict)  # set while lm-eval runs (offline: no hub lookups)


def validate_jsonl(path: Path, fields: tuple[str, ...] = ("question", "answer")) -> int:
    """Line count of a GSM8K JSONL file; a ConfigError naming file and line for anything malformed."""
    if not path.is_file():
        raise ConfigError(f"GSM8K data file {path} not found: set HARNESS_GSM8K_DIR to the folder holding "
                          "train.jsonl and test.jsonl, or HARNESS_GSM8K=hub on a connected machine")
    n = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column "
                                  f"{exc.start + 1}); nothing was sent") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: malformed JSON ({exc.msg}); nothing was sent") from None
            missing = [k for k in fields if not isinstance(row, dict) or k not in row]
            if missing:
                raise ConfigError(f"{path}:{lineno}: missing field(s) {missing}; nothing was sent")
            n += 1
    return n


def packaged_task_yaml() -> dict:
    import lm_eval

    return yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text())


def offline_task(data_dir: Path, out_dir: Path) -> TaskSource:
    files = {split: str((data_dir / f"{split}.jsonl").resolve()) for split in ("train", "test")}
    for path in files.values():
        validate_jsonl(Path(path))
    cfg = packaged_task_yaml()
    cfg.pop("dataset_name", None)
    cfg.pop("tag", None)
    cfg.update(task=LOCAL_TASK, dataset_path="json", dataset_kwargs={"data_files": files})
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{LOCAL_TASK}.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    return TaskSource(LOCAL_TASK, out_dir, files, {"HF_DATASETS_OFFLINE": "1"})


def data_dir_in_use() -> Path | None:
    """The local GSM8K folder the run will read, or None when lm-eval's hub task is used."""
    if os.environ.get("HARNESS_GSM8K", "").lower() == "hub":
        return None
    data_dir = gsm8k_dir()
    if "HARNESS_GSM8K_DIR" not in os.environ and not data_dir.is_dir():
        return None
    return data_dir


def check_data() -> str:
    """Validate the local files before any server starts; a ConfigError names file and line."""
    data_dir = data_dir_in_use()
    if data_dir is None:
        return "lm-eval's own gsm8k task (HF openai/gsm8k)"
    counts = {split: validate_jsonl(data_dir / f"{split}.jsonl") for split in ("train", "test")}
    return f"local GSM8K in {data_dir}: {counts['train']} train / {counts['test']} test"


def select_task(out_dir: Path) -> TaskSource:
    """Offline when the local files are there (or HARNESS_GSM8K_DIR says where); HARNESS_GSM8K=hub forces
    lm-eval's own task (HF openai/gsm8k) on a connected machine."""
    data_dir = data_dir_in_use()
    if data_dir is None:
        return TaskSource(TASK, None, None)
    return offline_task(data_dir, out_dir)


def make_model(base_url: str, model: str, num_concurrent: int, max_retries: int, timeout_s: float,
               max_gen_toks: int, alive: Callable[[], None]):
    """lm-eval's local-completions model, counting request errors instead of aborting: retrying stops after the
    last attempt or at once on a dead server, and the request is answered REQUEST_ERROR (scored wrong)."""
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    class HarnessCompletions(LocalCompletionsAPI):
        def _give_up(self, messages, exc: BaseException) -> bool:
            """Record a failed attempt; True when it is the last one worth making."""
            self.last_error = f"{type(exc).__name__}: {exc}"
            try:
                alive()
            except Exception as death:  # noqa: BLE001 - any failure of the check means the server is gone
                self.dead = str(death)
            attempts = self._attempts.get(id(messages), 0) + 1
            self._attempts[id(messages)] = attempts
            return self.dead is not None or attempts >= max_retries

        def _answered_as_error(self, messages) -> int:
            self._attempts.pop(id(messages), None)
            n = len(messages) if isinstance(messages, list) else 1
            self.request_errors += n
            self.progress.update(n)
            return n

        def _answered(self, messages, out):
            self.progress.update(len(messages) if isinstance(messages, list) else 1)
            return out

        def model_call(self, messages, *, generate=True, gen_kwargs=None, **kwargs):
            # lm-eval's path for num_concurrent <= 1
            if self.dead is None:
                try:
                    return self._answered(messages, super().model_call(messages, generate=generate,
                                                                       gen_kwargs=gen_kwargs, **kwargs))
                except Exception as exc:  # noqa: BLE001 - counted once retries are spent, never aborts the run
                    if not self._give_up(messages, exc):
                        raise  # lm-eval's retry makes the next attempt
            n = self._answered_as_error(messages)
            return {"choices": [{"index": i, "text": REQUEST_ERROR} for i in range(n)]}

        async def amodel_call(self, session, sem, messages, *, generate=True, cache_keys=None, ctxlens=None,
                              gen_kwargs=None, **kwargs):
            if self.dead is None:
                try:
                    return self._answered(messages, await super().amodel_call(
                        session, sem, messages, generate=generate, cache_keys=cache_keys, ctxlens=ctxlens,
                        gen_kwargs=gen_kwargs, **kwargs))
                except Exception as exc:  # noqa: BLE001 - counted once retries are spent, never aborts the run
                    if not self._give_up(messages, exc):
                        raise
            return [REQUEST_ERROR] * self._answered_as_error(messages)

    lm = HarnessCompletions(base_url=f"{base_url}/v1/completions", model=model, tokenizer_backend=None,
                            tokenized_requests=False, num_concurrent=num_concurrent, max_retries=max_retries,
                            timeout=int(timeout_s), max_gen_toks=max_gen_toks)
    lm.request_errors, lm.last_error, lm.dead, lm._attempts = 0, None, None, {}
    lm.progress = progress.bar("GSM8K answered", None, "questions")  # evaluate() sets the real one
    return lm


@dataclass(frozen=True)
class Scored:
    n: int
    correct: dict[str, int]  # filter -> questions scored correct, counted from the samples
    request_errors: int
    invalid: int  # empty response or no number extracted (flexible-extract), request errors excluded
    per_question: dict[str, dict[int, bool]]  # filter -> doc_id -> correct (the paired gate's input)


def score_samples(samples: list[dict]) -> Scored:
    """Pure: Correct/N per filter from lm-eval's per-sample log, not from a rounded mean."""
    per_question = per_question_of(samples)
    correct = {f: sum(per_question.get(f, {}).values()) for f in FILTERS}
    docs: dict[int, dict] = {}
    for s in samples:
        docs.setdefault(s["doc_id"], {})[s.get("filter")] = s
    errors = invalid = 0
    for by_filter in docs.values():
        sample = next(iter(by_filter.values()))
        response = (sample.get("resps") or [[""]])[0][0]
        if response == REQUEST_ERROR:
            errors += 1
            continue
        flexible = by_filter.get("flexible-extract", sample)
        extracted = (flexible.get("filtered_resps") or [""])[0]
        if not response.strip() or extracted in ("", INVALID):
            invalid += 1
    return Scored(len(docs), correct, errors, invalid, per_question)


@dataclass
class Evaluation:
    results: dict | None  # lm-eval's results dict; None when lm-eval itself failed
    samples: list[dict]
    samples_path: Path | None
    wall_s: float
    request_errors: int
    dead: str | None  # the server's death message, when it died during the run
    error: str | None  # lm-eval raised (nothing scored)


def lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def evaluate(lm, source: TaskSource, num_fewshot: int, limit: int | None, out_dir: Path) -> Evaluation:
    """Run lm-eval's simple_evaluate and keep its per-sample log under out_dir, whatever happens."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(source.include_path)) if source.include_path else TaskManager()
    t0 = time.monotonic()
    results, error = None, None
    try:
        with mock.patch.dict(os.environ, source.env), progress.bar(f"{lm.model}: GSM8K answered", limit,
                                                                   "questions") as lm.progress:
            results = simple_evaluate(model=lm, tasks=[source.task], num_fewshot=num_fewshot, limit=limit,
                                      log_samples=True, task_manager=tm, torch_random_seed=None)
    except Exception as exc:  # noqa: BLE001 - recorded as the run's failure, with what was gathered
        error = f"lm-eval failed: {type(exc).__name__}: {exc}"
    wall = time.monotonic() - t0
    samples = (results or {}).get("samples", {}).get(source.task, [])
    path = None
    if samples:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"samples_{source.task}.jsonl"
        with path.open("w") as f:
            for s in samples:
                f.write(json.dumps(s, default=str) + "\n")
    return Evaluation(results, samples, path, wall, lm.request_errors, lm.dead, error)


def task_hash(samples: list[dict]) -> str | None:
    """lm-eval's task hash, computed as its EvaluationTracker does (doc + prompt + target hashes)."""
    from lm_eval.utils import hash_string

    if not samples:
        return None
    return hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in samples))


def filter_scores(results: dict | None, task: str) -> dict[str, tuple[float | None, float | None]]:
    """(exact_match, stderr) per filter from lm-eval's aggregate results."""
    row = ((results or {}).get("results") or {}).get(task, {})
    out = {}
    for f in FILTERS:
        em, se = row.get(f"exact_match,{f}"), row.get(f"exact_match_stderr,{f}")
        out[f] = (em, se if isinstance(se, (int, float)) else None)
    return out


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def data_file_hashes(files: dict[str, str] | None) -> dict[str, str] | None:
    """{file name: "sha256:<hex>"} of the data files a run read: the provenance the report shows."""
    if not files:
        return None
    return {Path(p).name: file_sha256(Path(p)) for p in files.values()}


def gsm8k_fields(ev: Evaluation, source: TaskSource, w: Gsm8kWorkload) -> dict:
    """A Gsm8kRecord's fields from one evaluation: scores counted from the per-sample log, per-question results
    (the paired gate's input), request errors, and why it stopped early, if it did."""
    scored = score_samples(ev.samples)
    aggregate = filter_scores(ev.results, source.task)
    reason = ev.dead or ev.error
    return {"workload": w.name, "task": source.task, "data_files": data_file_hashes(source.data_files),
            "lm_eval_version": lm_eval_version(), "task_hash": task_hash(ev.samples), "num_fewshot": w.num_fewshot,
            "limit": w.limit, "n": scored.n,
            "scores": {f: FilterScore(exact_match=aggregate[f][0], stderr=aggregate[f][1], correct=scored.correct[f])
                       for f in aggregate},
            "request_errors": ev.request_errors, "invalid": scored.invalid,
            "status": "aborted" if reason else "complete", "reason": reason, "wall_s": round(ev.wall_s, 2),
            "num_concurrent": w.num_concurrent, "samples_path": str(ev.samples_path) if ev.samples_path else None,
            "per_question": scored.per_question}


def responses_by_doc(samples: list[dict]) -> dict[int, str]:
    """Pure: doc id -> the generated answer text (the degeneration detector's input); request errors left out."""
    out = {}
    for s in samples:
        text = (s.get("resps") or [[""]])[0][0]
        if "doc_id" in s and text != REQUEST_ERROR:
            out.setdefault(int(s["doc_id"]), text)
    return out
