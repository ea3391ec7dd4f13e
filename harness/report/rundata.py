"""Reading a finished run directory: results, run.json and the raw files its records reference.

Works on a copy on another machine: a recorded absolute path that does not exist is looked up relative to the
run directory. Whatever cannot be read becomes a message naming the file, never a crash or a silent gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.records.attempts import current_records
from harness.records.jsonl import read_jsonl
from harness.records.manifest import RunManifest, load_manifest
from harness.records.meaning import of_kind
from harness.records.paths import resolve_path
from harness.records.results import read_results
from harness.records.schema import Gsm8kRecord, LongPrefixRecord, Record, per_question_of


@dataclass
class RunData:
    run_dir: Path
    manifest: RunManifest | None  # None: run.json missing or unreadable (a problem says which)
    records: list[Record]
    problems: list[str]  # the reader's messages and every referenced file that could not be read

    @property
    def arm_order(self) -> list[str]:
        """run.json's arms (candidate first), then any other arm with a measurement. An arm that only has a server
        record (an eager variant launched to capture outputs) gets no table rows of its own."""
        order = list(self.manifest.arms or {}) if self.manifest else []
        measured = dict.fromkeys(r.arm for r in self.records if r.kind != "server")
        return order + [a for a in measured if a not in order]


def load_run(run_dir: Path) -> RunData:
    manifest, info_problems = load_manifest(run_dir)
    records, problems = read_results(run_dir / "results.jsonl")
    return run_data(run_dir, manifest, records, info_problems + problems)


def run_data(run_dir: Path, manifest: RunManifest | None, records: list[Record], problems: list[str]) -> RunData:
    """The run from run.json and results.jsonl as read (qualify's end reads them once, harness/qualify/finish.py):
    a resumed run's tests by their latest attempt only, older records completed from the files they name."""
    return with_tpot_samples(with_per_question(RunData(run_dir, manifest, current_records(records), problems)))


def load_results(results: Path) -> RunData:
    """A baseline run, known by its results file alone (no run.json needed); its problems say "baseline"."""
    records, problems = read_results(results)
    run = run_data(results.parent, None, records, problems)
    run.problems = [f"baseline {p}" for p in run.problems]
    return run


def with_per_question(run: RunData) -> RunData:
    """GSM8K records written before they carried per-question results get them from their samples log, so the
    gates and the baseline diff judge every record alike; a missing log is named (the gate then has no data)."""
    records = []
    for r in run.records:
        if isinstance(r, Gsm8kRecord) and r.per_question is None:
            path = resolve_path(run.run_dir, r.samples_path)
            if path is None:
                run.problems.append(f"GSM8K per-sample log of {r.arm}: file {r.samples_path!r} not found (nor under "
                                    f"{run.run_dir}); no per-question results: its gate has no data and a baseline "
                                    "diff compares it unpaired")
            else:
                rows, problems = read_jsonl(path)
                run.problems += problems
                r = r.model_copy(update={"per_question": per_question_of(rows)})
        records.append(r)
    run.records = records
    return run


def with_tpot_samples(run: RunData) -> RunData:
    """Long-prefix records written before they carried per-request TPOT get it from their samples file (the baseline
    diff's rank test reads the records); a missing file leaves it None, and the diff says 'no data'."""
    records = []
    for r in run.records:
        if isinstance(r, LongPrefixRecord) and r.tpot_samples_s is None:
            rows, problems = read_referenced(run, f"TPOT samples of {r.arm} c{r.concurrency}", r.samples_path)
            run.problems += problems
            if rows is not None:
                r = r.model_copy(update={"tpot_samples_s": ok_tpots(rows)})
        records.append(r)
    run.records = records
    return run


def ok_tpots(rows: list[dict]) -> list[float]:
    """TPOT (s) of every successful request of a samples file, in file order (pure)."""
    return [s["tpot_s"] for s in rows if not s.get("error") and s.get("tpot_s") is not None]


def missing(run: RunData, what: str, recorded: str | None) -> str:
    return f"{what}: file {recorded!r} not found (nor under {run.run_dir}); left out of the report"


def read_referenced(run: RunData, what: str, recorded: str | None) -> tuple[list[dict] | None, list[str]]:
    """The rows of a file a record names (found as recorded or under the run directory); None and why, if gone."""
    path = resolve_path(run.run_dir, recorded)
    if path is None:
        return None, [missing(run, what, recorded)]
    return read_jsonl(path)


def tpot_samples(run: RunData) -> tuple[dict[tuple[str, int], list[float]], list[str]]:
    """Per (arm, concurrency): TPOT in ms of every successful request, from the level's samples file."""
    out, problems = {}, []
    for r in of_kind(run.records, LongPrefixRecord):
        rows, bad = read_referenced(run, f"TPOT samples of {r.arm} c{r.concurrency}", r.samples_path)
        problems += bad
        if rows is not None:
            out[(r.arm, r.concurrency)] = [t * 1e3 for t in ok_tpots(rows)]
    return out, problems


def kv_series(run: RunData) -> tuple[dict[tuple[str, int], list[tuple[float, float]]], list[str]]:
    out, problems = {}, []
    for r in of_kind(run.records, LongPrefixRecord):
        if r.telemetry_path is None:
            problems.append(f"KV-usage timeline of {r.arm} c{r.concurrency}: no telemetry file recorded "
                            "(written by harness versions that persist the /metrics series)")
            continue
        rows, bad = read_referenced(run, f"KV-usage timeline of {r.arm} c{r.concurrency}", r.telemetry_path)
        problems += bad
        if rows is not None:
            out[(r.arm, r.concurrency)] = series_of(rows, "metrics", "kv_usage")
    return out, problems


def series_of(rows: list[dict], source: str, key: str) -> list[tuple[float, float]]:
    """(t_s, value) of one metric from a telemetry file's rows (pure)."""
    return [(row["t_s"], row["values"][key]) for row in rows
            if row.get("source") == source and key in row.get("values", {})]
