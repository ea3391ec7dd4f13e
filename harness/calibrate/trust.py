"""The chain of trust of `harness calibrate`: which runs may stand as a calibration's repeats, what a calibration that
replaces another must show, and when an arm's first calibration stops being "first".

A calibration decides what a fault is, so it is never made of what it should catch:
- a repeat that was interrupted (no end time, exit >= 128), refused (exit 2) or incomplete is refused, --trust or not;
- a repeat whose checks failed -- judged by the calibration that is current for the key, or by gates.yaml where the
  arm has none -- refuses the calibration, naming the checks and the repeats, unless `--trust "reason"` is given;
  only the calibrated arm's results count: another candidate of the same run (`qualify --arms`) is left out, said so;
- the repeats are K distinct finished runs of one build (one build hash, one harness: run.json harness_hash);
- the repeats are not copies (results.jsonl's content, renamed or not) nor repeats of the calibration in force; the
  calibration records their content hashes;
- an arm's first calibration is judged by `judge_first_calibration`; it says "first calibration" on every line it
  judges, a --trust'ed one says "trusted by hand: REASON", and a calibration judged by one that carries such labels
  inherits them (`inherited_labels`), until a run confirms it (`confirm_calibrations`, from qualify's end stage): a
  passing run of other vllm package files that judged every check calibrated for the key.
Reading a run (I/O) is `read_run`; the rest decides from what it read.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.calibrate.first_anchor import first_calibration_anchor
from harness.calibrate.repeats import CheckRepeat
from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.judge.drift_floor import judge_floor_pairing
from harness.judge.fp32_anchor import ANCHORED_CHECK, stored_level
from harness.records.attempts import current_records
from harness.records.jsonl import numbered_rows
from harness.records.manifest import RUN_JSON, ArmBuild, NotAManifest, RunManifest, interruption, read_manifest
from harness.records.results import read_results
from harness.records.schema import SCHEMA_VERSION, GateRecord, OutcomeRecord, Record, ReferenceCheckRecord
from harness.refcheck.judging.check import budget_at
from harness.refcheck.judging.compare import judge_comparisons
from harness.refcheck.judging.run_anchor import run_anchor
from harness.refcheck.store.accept_floor import floor_here
from harness.refcheck.store.floor_store import (
    Calibration,
    CalibrationUnreadable,
    Floor,
    load_calibration,
    load_confirmation,
    save_confirmation,
)
from harness.refcheck.store.reference_store import reference_dir

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
    """One repeat as recorded: run.json and the latest attempt's records, with the content hashes of both files (what
    a calibration records it was derived from) and `fingerprint`: results.jsonl's content with the run's own name
    and id written out, which a copy keeps however it was renamed."""

    run_dir: Path
    manifest: RunManifest
    records: list[Record]
    results_sha256: str = ""
    run_json_sha256: str = ""
    fingerprint: str = ""

    def hashes(self) -> dict:
        return {"run": self.run_dir.name, "results_sha256": self.results_sha256,
                "run_json_sha256": self.run_json_sha256}


def content_hashes(run_dir: Path, run_id: str | None) -> tuple[str, str, str]:
    """sha256 of results.jsonl and run.json, and the fingerprint (results.jsonl with every occurrence of the run's
    directory name and run id replaced by one placeholder, so a copy with both edited is still the same content)."""
    try:
        results = (run_dir / "results.jsonl").read_bytes()
    except OSError:
        results = b""
    text = results.decode("utf-8", "replace")
    for name in sorted({run_dir.name, run_id or run_dir.name}, key=len, reverse=True):
        text = text.replace(name, "<run>")
    run_json = (run_dir / "run.json").read_bytes()
    return (hashlib.sha256(results).hexdigest(), hashlib.sha256(run_json).hexdigest(),
            hashlib.sha256(text.encode()).hexdigest())


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
    return RepeatRun(run_dir, manifest, current_records(records), *content_hashes(run_dir, manifest.run_id))


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


def failures(run: RepeatRun, arm: str, judged_apart: frozenset[str] = frozenset()) -> list[str]:
    """What failed for `arm` in this run, as the run judged it: its failed checks, else its gates, else the failed
    tests that are not another candidate's (`others`: a run of several candidates), else the run's exit code unless
    other candidates' failed tests explain it (unexplained_exit). The checks in `judged_apart` (an arm's first
    calibration's: judge_first_calibration re-judges them) are left out, and their failures still explain the run's
    failed tests and exit code."""
    failed = [r.check for r in run.records if isinstance(r, ReferenceCheckRecord) and r.arm == arm and not r.passed]
    checks = [c for c in failed if c not in judged_apart]
    gates = [f"gate {r.gate}" for r in run.records if isinstance(r, GateRecord) and r.arm == arm and not r.passed]
    if failed or gates:
        return list(dict.fromkeys([*checks, *gates]))
    tests = [f"test {r.test}" for r in failed_tests(run) if r.arm not in others(run, arm)]
    if tests:
        return tests
    return unexplained_exit(run, arm)


def others(run: RepeatRun, arm: str) -> list[str]:
    """The run's candidates other than `arm` (`qualify --arms A,B`): their checks, gates and tests are not `arm`'s."""
    return [p.candidate for p in run.manifest.pairs if p.candidate != arm]


def failed_tests(run: RepeatRun) -> list[OutcomeRecord]:
    return [r for r in run.records if isinstance(r, OutcomeRecord) and r.outcome in ("failed", "error")]


def unexplained_exit(run: RepeatRun, arm: str) -> list[str]:
    """The run's exit code as a failure, unless it is pytest's 1 (tests failed), the verdict added nothing to it, and
    every failed test is another candidate's: then nothing of `arm`'s failed. A code with no test behind it (a
    session error, a gate or baseline that turned the verdict) stays a failure."""
    m = run.manifest
    if m.exit_code in (0, None):
        return []
    tests = failed_tests(run)
    if m.exit_code == m.pytest_exit_code == 1 and tests and all(r.arm in others(run, arm) for r in tests):
        return []
    return [f"exit code {m.exit_code}"]


def left_out(run: RepeatRun, arm: str) -> str | None:
    """The sentence calibrate prints for a repeat that ran other candidates beside `arm`: whose results it leaves
    out of `arm`'s calibration, and what failed there; None for a run of `arm` alone."""
    names = others(run, arm)
    if not names:
        return None
    failed = [r.test for r in failed_tests(run) if r.arm in names]
    return (f"calibrate {arm}: {run.run_dir.name} also ran {', '.join(names)}: only {arm}'s checks, gates and tests "
            f"judge its calibration; the other candidates' results are left out"
            + (f" (failed there: {', '.join(failed)})" if failed else ""))


@dataclass(frozen=True)
class FirstCalibration:
    """An arm's first calibration of `checks` (no calibration stood for their key, so nothing calibrated judged the
    repeats), as the repeats recorded it: what judge_first_calibration decides from."""

    candidate: Arm
    runs: list[RepeatRun]
    measured: list[dict[str, CheckRepeat]]  # per repeat, in order: check -> its record and comparisons
    checks: tuple[str, ...]


def judge_first_calibration(first: FirstCalibration) -> list[str]:
    """Why an arm's first calibration of these checks is refused, one sentence each ([]: it stands; --trust stores
    it anyway). Judged by its independent anchor where one can be measured (harness/calibrate/anchor.py: each arm's
    distance to a float32 teacher-forced pass, the reference's own equivalence noise): it stands or falls by that
    alone (gates.yaml's seed limits fail every clean bf16 repeat). Where none can be, by gates.yaml's seed limits,
    each repeat as it judged itself, and the refusal says no anchor could be measured."""
    anchor = first_calibration_anchor(first.candidate, first.runs[0].run_dir, first.runs[0].manifest,
                                      [{c: m[c] for c in first.checks if c in m} for m in first.measured])
    if anchor.measured:
        if anchor.passed:
            print(f"calibrate {first.candidate.name}: the first calibration stands by its independent anchor: "
                  f"{anchor.sentence}")
        return [] if anchor.passed else [f"{anchor.sentence} (the first calibration's independent anchor)"]
    print(f"calibrate {first.candidate.name}: {anchor.sentence}")
    out = []
    for check in first.checks:
        failed = [k for k, m in enumerate(first.measured, 1) if check in m and not m[check].record.passed]
        if failed:
            detail = first.measured[failed[0] - 1][check].record.detail
            out.append(f"{check} in repeat{'s' if len(failed) > 1 else ''} {', '.join(map(str, failed))} (judged by "
                       f"gates.yaml's limits: {detail})")
    return [*out, anchor.sentence] if out else out


def against_current(check: str, comparisons: list, current: Calibration, floor: Floor | None,
                    floor_path: Path, record: ReferenceCheckRecord | None = None) -> str | None:
    """The repeat's comparisons judged as a later run would be by the current calibration (its limits, its mean floor
    and the run's error budget at `floor_path`, the key's directory; where it anchors the check to float32 and the
    repeat's `record` names its reference outputs, the run's float32 anchor): None when they pass. The same judgement
    runs inside the repeat; here it also covers repeats made elsewhere (--from-runs) or before the current calibration
    was stored."""
    verdict = judge_comparisons(check, comparisons, current.drift_limit, current.tie_gap)
    if verdict.failures:
        return f"{len(verdict.failures)} request(s) over its limits ({verdict.failures[0]})"
    level = stored_level(current.spread) if check == ANCHORED_CHECK else None
    budget = replace(budget_at(floor_path, current), anchored=level is not None)
    if floor is not None:
        paired = judge_floor_pairing(comparisons, floor.comparisons, floor.name, current.spread.get("floor_shifts"),
                                     budget)
        if not paired.passed:
            return paired.sentence
    if level is not None and record is not None:
        anchor = run_anchor(reference_dir(), record.reference, record.reference_key, record.arm, comparisons, level,
                            budget)
        if not anchor.passed:
            return anchor.sentence
    return None


def copied_runs(runs: list[RepeatRun], previous: list[dict] = ()) -> str | None:
    """Two directories holding one run: the same run id and start, or the same results.jsonl content (its records'
    times are the run's own: an edited run_id, or a directory renamed throughout, leaves them), or a run that is
    already a repeat of the calibration in force (`previous`: the repeat hashes it recorded). A calibration of them
    would measure zero spread, as the same run given twice would; None when every run is its own."""
    seen: dict[object, Path] = {}
    for r in runs:
        ident = (r.manifest.run_id, r.manifest.started)
        content = "the same results.jsonl content under another run id"
        for key, how in ((ident, f"run id {ident[0]}, started {ident[1]}"), (("bytes", r.results_sha256), content),
                         (("renamed", r.fingerprint), content)):
            if key[0] is None or not key[1]:  # a run.json without its id: nothing to tell it by
                continue
            if key in seen:
                return (f"calibrate: {seen[key]} and {r.run_dir} are the same run ({how}; one is a copy): a "
                        "calibration's K repeats are K distinct runs; nothing was written")
            seen[key] = r.run_dir
    used = {h.get("results_sha256"): h.get("run") for h in previous or [] if isinstance(h, dict)}
    again = [(r, used[r.results_sha256]) for r in runs if r.results_sha256 in used]
    if again:
        r, name = again[0]
        return (f"calibrate: {r.run_dir} is repeat {name} of the calibration in force (the same results.jsonl "
                "content): a new calibration is measured on runs of its own; nothing was written")
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


def inherited_labels(previous: Calibration | None, path: Path) -> list[dict] | None:
    """The labels a calibration judged by `previous` carries from it: previous's open labels (its own "first
    calibration" and "trusted by hand", and what it inherited), unless a run has confirmed it; None: none."""
    if previous is None or load_confirmation(path, previous) is not None:
        return None
    return previous.open_labels or None


def confirm_calibrations(manifest: RunManifest, records: list[Record]) -> list[str]:
    """After a run's verdict, for each calibration key whose calibrations still carry labels (first, trusted by hand,
    inherited) and that judged checks of this run: one sentence, why the run confirmed them (<check>.confirmed.json
    written for each; their labels go) or why it did not (why_not_confirmed). A calibration repeat confirms nothing."""
    if manifest.calibration is not None:
        return []
    latest: dict[Path, dict[str, ReferenceCheckRecord]] = {}
    for r in records:
        if isinstance(r, ReferenceCheckRecord) and r.floor_path:
            latest.setdefault(floor_here(r.floor_path), {})[r.check] = r
    out = []
    for path, judged in latest.items():
        try:
            calibrated = {f.name.removesuffix(".calibration.json"): load_calibration(
                path, f.name.removesuffix(".calibration.json")) for f in sorted(path.glob("*.calibration.json"))}
        except CalibrationUnreadable:
            continue  # the checks it would judge FAILed "no data": nothing to confirm
        labelled = {c: cal for c, cal in calibrated.items() if cal.open_labels and load_confirmation(path, cal) is None}
        if not labelled:
            continue
        arm = next(iter(labelled.values())).arm
        ids = ", ".join(sorted({cal.calibration for cal in labelled.values()}))
        why = why_not_confirmed(manifest, calibrated, judged, arm)
        if why:
            out.append(f"calibration {ids} of {arm} not confirmed by run {manifest.run_id}: {why}")
            continue
        build = (manifest.builds or {})[arm]
        when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        for check, cal in sorted(labelled.items()):
            save_confirmation(path, check, {"calibration": cal.calibration, "run": manifest.run_id,
                                            "build": build.model_dump(), "confirmed": when})
            out.append(f"calibration {cal.calibration} of {arm} ({check}) confirmed: run {manifest.run_id} of another "
                       f"build (vllm package {build.package_hash}, vLLM {build.vllm_version}) passed every check "
                       f"calibrated for the key ({', '.join(sorted(calibrated))}), each judged by its calibration")
    return out


def why_not_confirmed(manifest: RunManifest, calibrated: dict[str, Calibration],
                      judged: dict[str, ReferenceCheckRecord], arm: str | None) -> str | None:
    """Why this run does not confirm the key's calibrations, one clause per reason; None when it does: it passed, its
    vllm package files differ from the calibrated build's (the package's own hash: a transformers or torch bump
    under the same files is no other vLLM), and every check calibrated for the key ran and passed, judged by its
    calibration (a skipped family vouches for nothing)."""
    why = []
    if manifest.exit_code != 0:
        why.append(f"the run did not pass (exit code {manifest.exit_code})")
    build = (manifest.builds or {}).get(arm or "")
    built = {(cal.build or {}).get("package_hash") for cal in calibrated.values()}
    if build is None or not build.package_hash:
        why.append(f"the run recorded no vllm package hash of {arm} (run.json builds, from an older harness)")
    elif None in built:
        why.append("the calibration recorded no vllm package hash of the build it measured (stored before it did): "
                   "it cannot be confirmed; calibrate again to make one that can")
    elif build.package_hash in built:
        own = {(cal.build or {}).get("build_hash") for cal in calibrated.values()}
        why.append("the run is of the calibration's own build" if build.build_hash in own else
                   f"the run's vllm package files are the calibrated build's ({build.package_hash}): only the "
                   "libraries beside it changed, which is no other vLLM")
    for check, cal in sorted(calibrated.items()):
        r = judged.get(check)
        if r is None:
            why.append(f"{check} is calibrated for this key and was not judged in this run (skipped or not run)")
        elif r.arm != arm:
            why.append(f"{check} was judged for {r.arm}, not the calibration's arm {arm} (a planted-fault variant "
                       "confirms nothing)")
        elif r.status != "complete" or not r.passed:
            why.append(f"{check} did not pass complete")
        elif not (r.judged_by or "").startswith(cal.short):
            why.append(f"{check} was not judged by calibration {cal.calibration} (judged by: {r.judged_by})")
    return "; ".join(why) or None
