"""The chain of trust of `harness calibrate`: which runs may stand as a calibration's repeats, what a calibration that
replaces another must show, and when an arm's first calibration stops being "first".

A calibration decides what a fault is, so it is never made of what it should catch:
- a repeat that was interrupted (no end time, exit >= 128), refused (exit 2) or incomplete is refused, --trust or not;
- a repeat whose checks failed -- judged by the calibration that is current for the key, or by gates.yaml where the
  arm has none -- refuses the calibration, naming the checks and the repeats, unless `--trust "reason"` is given;
- the repeats are K distinct finished runs of one build (one build hash, one harness: run.json harness_hash);
- an arm's first calibration (nothing before it: only gates.yaml judged its repeats) says "first calibration" on every
  line it judges until a run of another build has passed against it (`confirm_first_calibrations`, from qualify's end
  stage; a run never writes its own floor, and this is no floor).
Reading a run (I/O) is `read_run`; the rest decides from what it read.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from harness.config.errors import ConfigError
from harness.judge.drift_floor import judge_floor_pairing
from harness.records.attempts import current_records
from harness.records.jsonl import numbered_rows
from harness.records.manifest import RUN_JSON, ArmBuild, NotAManifest, RunManifest, interruption, read_manifest
from harness.records.results import read_results
from harness.records.schema import SCHEMA_VERSION, GateRecord, OutcomeRecord, Record, ReferenceCheckRecord
from harness.refcheck.accept_floor import floor_here
from harness.refcheck.compare import judge_comparisons
from harness.refcheck.floor_store import (
    Calibration,
    CalibrationUnreadable,
    Floor,
    load_calibration,
    load_confirmation,
    save_confirmation,
)

# A calibration's name is one directory under reports/: its repeats are reports/<id>-r<k>, its table reports/<id>/.
ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_id(ident: str) -> str:
    """--id as one directory name under reports/ (never a path that leaves it)."""
    if not ID_PATTERN.fullmatch(ident) or ".." in ident:
        raise ConfigError(f"calibrate --id {ident!r}: a calibration's name is one directory name under reports/ "
                          "(letters, digits, '.', '_', '-'; no '/', no '..', not an absolute path): choose another; "
                          "nothing was run or written")
    return ident


def check_trust(reason: str | None) -> str | None:
    if reason is not None and not reason.strip():
        raise ConfigError("calibrate --trust '': give the reason this calibration is trusted although its repeats "
                          "failed (it is printed on every line the calibration judges); nothing was run or written")
    return reason.strip() if reason is not None else None


@dataclass(frozen=True)
class RepeatRun:
    """One repeat as recorded: run.json and the latest attempt's records."""

    run_dir: Path
    manifest: RunManifest
    records: list[Record]


def newer_version(doc: object, field: str, current: int) -> object | None:
    """The document's version where it is newer than this harness reads, else None."""
    version = doc.get(field) if isinstance(doc, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) and version > current else None


def read_run(run_dir: Path) -> RepeatRun:
    """A repeat's run.json and results.jsonl; a ConfigError naming the file when either is missing, unreadable or of a
    newer format than this harness reads."""
    path = run_dir / "run.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"calibrate: {path} cannot be read ({exc.__class__.__name__}): a repeat is a finished run "
                          "with its run.json; nothing was written") from None
    newer = newer_version(raw, RUN_JSON.version_field, RUN_JSON.current)
    if newer is not None:
        raise ConfigError(f"calibrate: {path} is of a newer format ({RUN_JSON.version_field} {newer}; this harness "
                          f"reads run.json version {RUN_JSON.current} and older): calibrate from it with the harness "
                          f"that wrote it (harness_version {raw.get('harness_version')}); nothing was written")
    try:
        manifest = read_manifest(run_dir)
    except NotAManifest as exc:
        raise ConfigError(f"calibrate: {exc}; nothing was written") from None
    results = run_dir / "results.jsonl"
    if results.is_file():
        rows, _ = numbered_rows(results)
        newer_rows = [(n, v) for n, d in rows if (v := newer_version(d, "schema_version", SCHEMA_VERSION)) is not None]
        if newer_rows:
            line, version = newer_rows[0]
            raise ConfigError(f"calibrate: {results}:{line} is a record of a newer format (schema_version {version}; "
                              f"this harness reads version {SCHEMA_VERSION} and older): calibrate from it with the "
                              "harness that wrote it; nothing was written")
    records, problems = read_results(results)
    if problems:
        raise ConfigError(f"calibrate: {run_dir.name} cannot be read whole ({problems[0]}): a calibration is made of "
                          "complete repeats; nothing was written")
    return RepeatRun(run_dir, manifest, current_records(records))


def unusable(run: RepeatRun, arm: str) -> str | None:
    """Why this run cannot be a repeat of `arm`'s calibration whatever --trust says; None when it can."""
    m = run.manifest
    stopped = interruption(m)
    if stopped:
        return f"{run.run_dir.name} was interrupted ({stopped[0]})"
    if m.exit_code == 2:
        return f"{run.run_dir.name} was refused before its checks ran (exit code 2)"
    if arm not in [p.candidate for p in m.pairs]:
        return (f"{run.run_dir.name} is a run of {', '.join(p.candidate for p in m.pairs) or 'no candidate'}, not of "
                f"{arm}")
    return None


def failures(run: RepeatRun, arm: str) -> list[str]:
    """What failed in this run, as the run judged it: its failed checks, else gates, else tests, else its exit code."""
    checks = [r.check for r in run.records if isinstance(r, ReferenceCheckRecord) and r.arm == arm and not r.passed]
    gates = [f"gate {r.gate}" for r in run.records if isinstance(r, GateRecord) and r.arm == arm and not r.passed]
    if checks or gates:
        return list(dict.fromkeys([*checks, *gates]))
    tests = [f"test {r.test}" for r in run.records if isinstance(r, OutcomeRecord) and r.outcome in ("failed", "error")]
    if tests:
        return tests
    code = run.manifest.exit_code
    return [f"exit code {code}"] if code not in (0, None) else []


def against_current(check: str, comparisons: list, current: Calibration, floor: Floor | None) -> str | None:
    """The repeat's comparisons judged as a later run would be by the current calibration (its limits and its mean
    floor): None when they pass. The same judgement runs inside the repeat; here it also covers repeats made elsewhere
    (--from-runs) or before the current calibration was stored."""
    verdict = judge_comparisons(check, comparisons, current.drift_limit, current.tie_gap)
    if verdict.failures:
        return f"{len(verdict.failures)} request(s) over its limits ({verdict.failures[0]})"
    if floor is not None:
        paired = judge_floor_pairing(comparisons, floor.comparisons, floor.name, current.spread.get("floor_shifts"))
        if not paired.passed:
            return paired.sentence
    return None


def copied_runs(runs: list[RepeatRun]) -> str | None:
    """Two directories holding one run (a copy keeps run.json's run id and start): a calibration of them would measure
    zero spread, as the same run given twice would; None when every run is its own."""
    seen: dict[tuple, Path] = {}
    for r in runs:
        ident = (r.manifest.run_id, r.manifest.started)
        if ident[0] is None:  # a run.json without its id: nothing to tell it by
            continue
        if ident in seen:
            return (f"calibrate: {seen[ident]} and {r.run_dir} are the same run (run id {ident[0]}, started "
                    f"{ident[1]}; one is a copy): a calibration's K repeats are K distinct runs; nothing was written")
        seen[ident] = r.run_dir
    return None


def one_build(runs: list[RepeatRun], arm: str) -> ArmBuild:
    """The build every repeat ran (one build hash, one harness_hash); a ConfigError naming the runs otherwise."""
    builds = {r.run_dir.name: (r.manifest.builds or {}).get(arm) for r in runs}
    missing = [name for name, b in builds.items() if b is None or not b.build_hash]
    if missing:
        raise ConfigError(f"calibrate: {', '.join(missing)} recorded no vLLM build of {arm} (run.json `builds`: a run "
                          "of an older harness, or no vllm package found): a calibration records the build it "
                          "measured; calibrate from repeats of this harness; nothing was written")
    hashes = sorted({b.build_hash for b in builds.values()})
    if len(hashes) > 1:
        named = "; ".join(f"{n}: {b.build_hash} (vLLM {b.vllm_version})" for n, b in builds.items())
        raise ConfigError(f"calibrate: the repeats ran different builds of {arm} ({named}): a calibration measures "
                          "one build; give repeats of one build; nothing was written")
    code = same_harness(runs)
    if code:
        raise ConfigError(code)
    return next(iter(builds.values()))


def same_harness(runs: list[RepeatRun]) -> str | None:
    """Why the repeats did not run one harness (None: they did). Keyed on the hash of the files that measure and
    judge (run.json `harness_hash`, records/runinfo.py), not the commit: repeats of two device sessions, or across a
    docs commit, combine. Runs of an older harness without the hash fall back to the commit."""
    hashes = {r.manifest.harness_hash for r in runs}
    if None not in hashes:
        if len(hashes) > 1:
            named = "; ".join(f"{r.run_dir.name}: {r.manifest.harness_hash}" for r in runs)
            return (f"calibrate: the repeats ran different measuring/judging code ({named}; run.json harness_hash): "
                    "a calibration compares like with like; give repeats of one harness; nothing was written")
        return None
    commits = sorted({str(r.manifest.git_commit) for r in runs})
    if len(commits) > 1:
        return (f"calibrate: the repeats ran different harness commits ({', '.join(commits)}) and not all recorded "
                "a harness_hash: a calibration compares like with like; give repeats of one commit; nothing was "
                "written")
    return None


def confirm_first_calibrations(manifest: RunManifest, records: list[Record]) -> list[str]:
    """After a run that passed: every check of it judged by an arm's first calibration, run on another build than the
    calibration's, confirms that calibration (<check>.confirmed.json beside it); its lines stop saying "first
    calibration". A calibration repeat confirms nothing, nor does a planted-fault variant (`calibration_from`: another
    arm than the calibration's). Returns one line per confirmation written."""
    if manifest.calibration is not None or manifest.exit_code != 0:
        return []
    out = []
    for r in records:
        if not (isinstance(r, ReferenceCheckRecord) and r.floor_path and r.passed and r.status == "complete"):
            continue
        path = floor_here(r.floor_path)
        try:
            calibration = load_calibration(path, r.check)
        except CalibrationUnreadable:
            continue
        build = (manifest.builds or {}).get(r.arm)
        # judged by this calibration (its line starts with the calibration's): a check judged before it was stored
        # (a resumed run's, by gates.yaml) vouches for nothing
        if (calibration is None or not calibration.first or not (r.judged_by or "").startswith(calibration.short)
                or calibration.arm != r.arm or build is None
                or not build.build_hash or build.build_hash == (calibration.build or {}).get("build_hash")
                or load_confirmation(path, calibration) is not None):
            continue
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        save_confirmation(path, r.check, {"calibration": calibration.calibration, "run": manifest.run_id,
                                          "build": build.model_dump(), "confirmed": when})
        out.append(f"calibration {calibration.calibration} of {r.arm} ({r.check}) confirmed: run {manifest.run_id} of "
                   f"another build ({build.build_hash}, vLLM {build.vllm_version}) passed against it")
    return out
