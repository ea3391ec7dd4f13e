"""The long-prefix outputs check against a live candidate (I/O): read both arms' samples files, compare every
request's output with the reference's, teacher-force a sample of the reference's outputs on the candidate, and
return the fields of the records (harness/refcheck/judging/timed_outputs.py does the judging).

It runs inside the candidate's own long_prefix test, after its levels, while its server is up: the reference's
samples exist by then (a serial run measures every reference before its candidates; a parallel one waits for the
reference's test first).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from harness.config.errors import HarnessError
from harness.config.workloads import LongPrefixWorkload
from harness.measure.generation import score_forced
from harness.measure.prompts import Prompts
from harness.measure.textbasis import to_ids, to_text
from harness.records.jsonl import read_jsonl
from harness.records.paths import resolve_path
from harness.refcheck.judging.teacher_forcing import compare_forced
from harness.refcheck.judging.timed_outputs import (
    TimedComparisons,
    by_request,
    compare_pairs,
    forced_picks,
    pair_outputs,
    request_id,
    samples_files,
)
from harness.serve.launch import LiveServer


@dataclass
class TimedOutputsCompared(TimedComparisons):
    outputs: list[tuple[str, list[int], list[int]]]  # (request, candidate tokens, reference tokens): degeneration
    reference_key: str  # where the reference's outputs came from
    sink: Path  # every comparison, one JSON line each


def read_rows(paths: dict[int, str], run_dir: Path, arm: str) -> tuple[dict, list[str]]:
    """Every sample of the given levels; a file not at its recorded path is looked for under the run directory."""
    rows, problems = [], []
    for c, recorded in paths.items():
        path = resolve_path(run_dir, recorded)
        if path is None or not path.is_file():
            problems.append(f"{arm} c{c}: samples file {recorded} not found")
            continue
        got, bad = read_jsonl(path)
        rows += got
        problems += bad
    return by_request(rows), problems


async def prompt_ids(live: LiveServer, workload: LongPrefixWorkload, ids: list[int]) -> list[int]:
    """The prompt as the server saw it: the ids, or for the text basis the server's tokens of its own text."""
    if workload.prompt_basis != "text":
        return ids
    base, model = live.info.base_url, live.arm.model.served_name
    return (await to_ids(base, model, await to_text(base, model, [ids])))[0]


def compare_timed_outputs(live: LiveServer, workload: LongPrefixWorkload, prompts: Prompts, records: list,
                          reference: str, run_dir: Path, forced_requests: int) -> TimedOutputsCompared:
    """Both arms' recorded samples of this run, paired by request; `forced_requests` of them teacher-forced."""
    arm = live.arm
    sha = prompts.fingerprint()
    ref_paths, gaps = samples_files(records, reference, sha)
    mine_paths, mine_gaps = samples_files(records, arm.name, sha)
    ref_rows, missing = read_rows(ref_paths, run_dir, reference)
    mine_rows, more = read_rows(mine_paths, run_dir, arm.name)
    gaps = [*gaps, *mine_gaps, *(f"no data: {m}" for m in missing + more)]
    pairs, unpaired = pair_outputs(mine_rows, ref_rows, arm.name, reference) if not gaps else ([], [])
    gaps += unpaired
    generated = compare_pairs(pairs)
    budget = arm.server.max_num_batched_tokens if arm.parallelism.dcp > 1 else None
    outputs = {key: (c, r) for key, c, r, _ in pairs}
    forced, aborted = [], None
    for level, index in forced_picks(list(outputs), forced_requests):
        ref_gen = outputs[(level, index)][1]
        try:
            live.server.check_alive()
            ids = asyncio.run(prompt_ids(live, workload, prompts.measured[level][index]))
            scored = asyncio.run(score_forced(live.info.base_url, arm.model.served_name, ids, ref_gen.token_ids,
                                              arm.timeouts.request_s))
        except HarnessError as exc:
            aborted = f"teacher forcing {request_id(level, index)}: {exc}"
            break
        forced.append(compare_forced(request_id(level, index), len(ids), scored, ref_gen, f"c{level} forced",
                                     budget))
    sink = run_dir / arm.name / f"long_prefix_outputs_vs_{reference}_comparisons.jsonl"
    sink.parent.mkdir(parents=True, exist_ok=True)
    sink.write_text("".join(c.model_dump_json() + "\n" for c in [*generated, *forced]))
    return TimedOutputsCompared(generated, forced, gaps, aborted,
                    [(request_id(*key), c.token_ids, r.token_ids) for key, (c, r) in outputs.items()],
                    f"long_prefix samples of {reference} in this run (prompts {sha})", sink)
