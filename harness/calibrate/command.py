"""`harness calibrate --arm A`'s calibration: from K repeats of the arm's output checks against its stored reference on
a build taken as good (run by harness/qualify/calibrating.py, or given with --from-runs), derive and store each check's
limits and floor (harness/judge/calibration.py) under the key later runs look for (candidate config and the reference
outputs' noise key, no vLLM version: harness/refcheck/store/floor_store.py), with the build it measured.

One pass, in one direction: read_repeats (each repeat read once) -> derive -> decide (ceilings and the chain of trust,
harness/calibrate/trust.py: each repeat judged by the calibration current for its key, an arm's first calibration by
judge_first_calibration, on the arm's own results: another candidate of the same run is left out, said so; a
calibration whose repeats failed, or one that replaces a calibration that cannot judge, is refused naming the checks
and the repeats, or the file, unless --trust gives the reason, which then stays with it) -> write. Nothing is written
until every check of the calibration stands.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from harness.calibrate.first_anchor import anchor_level
from harness.calibrate.repeats import CheckRepeat, read_repeat
from harness.calibrate.trust import (
    FirstCalibration,
    RepeatRun,
    against_current,
    check_id,
    check_trust,
    copied_runs,
    failures,
    inherited_labels,
    judge_first_calibration,
    left_out,
    one_build,
    read_run,
    unusable,
)
from harness.config.arms import Arm, load_arm
from harness.config.errors import ConfigError
from harness.config.paths import GATES_FILE, REPO_ROOT, REPORTS_DIR
from harness.config.thresholds import CalibrationGates, Gates, ReferenceCheckGates, load_gates
from harness.judge.calibration import (
    Limits,
    ceiling_violations,
    derive_limits,
    false_positives,
    held_out_shifts,
    limit_moves,
    mean_floor,
    percent,
    run_to_run_deviations,
    spread,
)
from harness.judge.error_budget import Family
from harness.judge.fp32_anchor import ANCHORED_CHECK, AnchorLevel
from harness.records.manifest import ArmBuild
from harness.records.schema import RequestComparison, ServerRecord
from harness.refcheck.judging.check import family_at
from harness.refcheck.judging.compare import failure_line
from harness.refcheck.judging.standing import standing_calibration
from harness.refcheck.store.accept_floor import floor_here
from harness.refcheck.store.floor_store import (
    Calibration,
    CalibrationUnreadable,
    load_floor,
    save_calibration,
)
from harness.refcheck.store.reference_store import arm_config_sha, model_identity


def not_a_variant(arm: str, candidate: Arm) -> Arm:
    """A planted-fault variant (`calibration_from: BASE`) is judged by BASE's calibration, and its repeats' records name
    BASE's key: calibrating it would store the fault's spread as BASE's calibration. Refused, naming BASE."""
    base = candidate.calibration_from
    if base:
        raise ConfigError(f"calibrate --arm {arm}: the arm is judged by the calibration of {base} (calibration_from: "
                          f"{base}, a planted-fault variant of it); calibrating it would store the fault as {base}'s "
                          f"clean spread: run `python -m harness calibrate --arm {base}` on a good build; nothing was "
                          "run or written")
    return candidate


def distinct_runs(run_dirs: list[Path], need: int, arm: str) -> None:
    """K repeats are K distinct runs, at least the arm's minimum."""
    seen: dict[Path, Path] = {}
    for d in run_dirs:
        if d.resolve() in seen:
            raise ConfigError(f"calibrate: {seen[d.resolve()]} and {d} are the same run: a calibration's K repeats are "
                              "K distinct runs; nothing was written")
        seen[d.resolve()] = d
    if len(run_dirs) < need:
        raise ConfigError(f"calibrate: {len(run_dirs)} run(s) given; arm {arm} calibrates from at least {need} "
                          "distinct finished repeats of one build (gates.yaml calibration.min_repeats); nothing was "
                          "written")


def store_calibration(arm: str, ident: str, run_dirs: list[Path], *, trust: str | None = None,
                      candidate: Arm | None = None) -> int:
    """One pass, each stage taking the previous one's value: the repeats read once (read_repeats: refused when they
    are not K distinct finished runs of one build, or a check is incomplete) -> every check derived (derive) -> judged
    (decide: a derived value above its ceiling refuses it, --trust or not; unless `trust` gives the reason, repeats
    that failed against the current calibration, a refused first calibration, a limit that moved more than
    calibration.max_move_factor, or a current calibration that cannot judge) -> stored under the key and tabled
    (reports/<ident>/calibration.md and .json: write), nothing written before."""
    ident, trust = check_id(ident), check_trust(trust)
    repeats = read_repeats(arm, run_dirs, candidate)
    derived = derive(repeats, ident)
    return write(repeats, derived, decide(repeats, derived, ident, trust))


@dataclass(frozen=True)
class Repeats:
    """The K repeats read once (run.json, records, each check's comparisons), the build they ran, and what each
    check's key holds now: the calibration a new one would replace (None: the first, or one that cannot judge:
    `unreadable`, file and why)."""

    arm: str
    candidate: Arm
    gates: Gates
    runs: list[RepeatRun]
    measured: list[dict[str, CheckRepeat]]  # per repeat: check -> its record and comparisons
    build: ArmBuild
    previous: dict[str, Calibration | None]
    unreadable: dict[str, str]

    @property
    def checks(self) -> list[str]:
        return sorted(self.previous)

    @property
    def first(self) -> tuple[str, ...]:
        """The checks calibrated here for the first time: nothing stood for their key."""
        return tuple(c for c in self.checks if self.previous[c] is None and c not in self.unreadable)

    @property
    def vllm(self) -> list[str]:
        """The vLLM versions the arm's servers reported in the repeats (one, unless the build changed under them)."""
        return sorted({r.vllm_version for run in self.runs for r in run.records
                       if isinstance(r, ServerRecord) and r.arm == self.arm and r.vllm_version})


def read_repeats(arm: str, run_dirs: list[Path], candidate: Arm | None) -> Repeats:
    """Every repeat read once, and refused (ConfigError, nothing written) where they cannot be a calibration whatever
    --trust says: a planted-fault variant, fewer than K distinct runs, a copy, an unfinished or foreign run, several
    builds, a check missing from a repeat, a repeat of the calibration in force."""
    candidate = not_a_variant(arm, candidate or load_arm(arm))
    gates = load_gates(arm)
    distinct_runs(run_dirs, gates.calibration.min_repeats, arm)
    runs = [read_run(d) for d in run_dirs]
    copy = copied_runs(runs)
    if copy:
        raise ConfigError(copy)
    stopped = [why for r in runs if (why := unusable(r, arm))]
    if stopped:
        raise ConfigError(f"calibrate: {'; '.join(stopped)}: a calibration is made of finished repeats of the arm "
                          "(--trust does not change that); calibrate again; nothing was written")
    build = one_build(runs, arm)
    measured = [read_repeat(r.run_dir, arm, r.records) for r in runs]
    checks = sorted(set.intersection(*(set(m) for m in measured)))
    partial = sorted(set.union(*(set(m) for m in measured)) - set(checks))
    if partial:
        raise ConfigError(f"calibrate: {', '.join(partial)} did not run in every repeat; a calibration compares like "
                          "with like: calibrate again")
    where = f"{gates_file()}, arm {arm}"
    current = {c: current_calibration(measured[0][c].record.floor_path, c, gates.calibration, where) for c in checks}
    previous = {c: cal for c, (cal, _) in current.items()}
    copy = copied_runs(runs, [h for cal in previous.values() if cal for h in cal.repeat_hashes or []])
    if copy:
        raise ConfigError(copy)
    return Repeats(arm, candidate, gates, runs, measured, build, previous,
                   {c: why for c, (_, why) in current.items() if why})


def derive(repeats: Repeats, ident: str) -> list[CheckCalibration]:
    """Every check's limits, floor and false-positive statement from its clean repeats (calibrate_check)."""
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    source = CalibrationSource(ident, when, tuple(r.run_dir for r in repeats.runs), tuple(repeats.vllm))
    first = repeats.measured[0]
    family = family_at(floor_here(first[repeats.checks[0]].record.floor_path), repeats.checks)
    level = (anchor_level(repeats.candidate, repeats.runs[0].run_dir, repeats.runs[0].manifest, repeats.measured)
             if ANCHORED_CHECK in first else None)
    return [calibrate_check(check, [m[check] for m in repeats.measured], repeats.gates.reference_checks, source,
                            repeats.previous[check], family=family, level=level if check == ANCHORED_CHECK else None)
            for check in repeats.checks]


@dataclass(frozen=True)
class Decision:
    """Why the calibration may be stored: what judged its repeats and what they failed there (stored only with
    `trust`, the reason given; None: nothing needed it)."""

    judges: str
    failed: dict[str, list[int]]
    moves: list[str]
    first_refusals: list[str]
    trust: str | None

    @property
    def overridden(self) -> str:
        """What --trust overrode, in a few words."""
        return (f"its repeats failed against {self.judges}" if self.failed else
                f"a limit moved against {self.judges}" if self.moves else
                f"its first calibration was refused ({'; '.join(self.first_refusals)})" if self.first_refusals else
                f"the calibration it replaces cannot judge ({self.judges})")


def decide(repeats: Repeats, derived: list[CheckCalibration], ident: str, trust: str | None) -> Decision:
    """The chain of trust over what was derived: a value above its ceiling refuses the calibration, --trust or not;
    repeats that failed against the current calibration (judge_first_calibration for an arm's first), a limit that
    moved too far or a current calibration that cannot judge refuse it unless --trust gives the reason."""
    arm, first = repeats.arm, repeats.first
    for line in filter(None, (left_out(r, arm) for r in repeats.runs)):
        print(line)
    first_refusals = (judge_first_calibration(FirstCalibration(repeats.candidate, repeats.runs, repeats.measured,
                                                               first)) if first else [])
    failed = failed_repeats(repeats.runs, repeats.measured, repeats.previous, arm, frozenset(first))
    judges = judged_against(repeats.previous, list(repeats.unreadable.values()))
    ceilings = [c for d in derived for c in d.ceilings]
    if ceilings:
        also = f" (its repeats also failed against {judges}: {failed_names(failed)})" if failed else ""
        raise ConfigError(f"calibrate: {'; '.join(ceilings)}: a derived value above its ceiling is refused, --trust "
                          f"or not (a ceiling is measured: configs/gates.yaml `calibration:`){also}; nothing was "
                          "written")
    moves = [m for d in derived for m in d.moves]
    needed = bool(failed or moves or repeats.unreadable or first_refusals)
    if needed and trust is None:
        raise ConfigError(refusal(arm, ident, failed, moves, judges, [r.run_dir for r in repeats.runs],
                                  list(repeats.unreadable.values()), first_refusals))
    if trust is not None and not needed:
        print(f"calibrate {arm}: --trust not needed: the repeats passed against {judges}; the reason is not recorded")
    return Decision(judges, failed, moves, first_refusals, trust if needed else None)


def write(repeats: Repeats, derived: list[CheckCalibration], decision: Decision) -> int:
    """Every check's calibration under its key (each with its provenance, the labels it inherits, its repeats'
    hashes), then reports/<id>/calibration.json and .md; prints the table and what the calibration carries."""
    arm, trust = repeats.arm, decision.trust
    provenance = {"build": repeats.build.model_dump(), "arm": arm, "model": model_identity(repeats.candidate),
                  "arm_config_sha": arm_config_sha(repeats.candidate), "trusted": trust,
                  "repeat_hashes": [r.hashes() for r in repeats.runs]}
    inherited = {d.calibration.check: inherited_labels(repeats.previous[d.calibration.check], d.path) for d in derived}
    for d in derived:
        prev = repeats.previous[d.calibration.check]
        against = "gates.yaml" + (" (it replaced a calibration that could not be read)"
                                  if d.calibration.check in repeats.unreadable else "")
        calibration = replace(d.calibration, **provenance, reference_key=d.source.get("reference_key"),
                              judged_against=f"the calibration {prev.calibration}" if prev else against,
                              supersedes=prev.calibration if prev else None, inherited=inherited[d.calibration.check])
        save_calibration(d.path, calibration, d.floor, d.source)
    ident, when = derived[0].calibration.calibration, derived[0].calibration.calibrated
    rows = [d.row for d in derived]
    out = REPORTS_DIR / ident
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps({
        "arm": arm, "calibration": ident, "calibrated": when, "repeats": [str(r.run_dir) for r in repeats.runs],
        "vllm": repeats.vllm, "build": repeats.build.model_dump(), "judged_against": decision.judges,
        "trusted": trust, "failed": decision.failed, "moves": decision.moves, "checks": rows,
        "repeat_hashes": provenance["repeat_hashes"], "inherited": {c: i for c, i in inherited.items() if i}},
        indent=1) + "\n")
    table = calibration_table(arm, ident, rows)
    (out / "calibration.md").write_text(table)
    print(table, end="")
    if trust is not None:
        print(f"calibration of {arm} stored although {decision.overridden}: trusted by hand: {trust} (printed on "
              "every line it judges)")
    carried = sorted({line for labels in inherited.values() if labels for line in inherited_lines(labels)})
    if carried:
        print(f"calibration of {arm} judged by a calibration no run has confirmed: it carries {'; '.join(carried)} "
              "on every line it judges until a run confirms it")
    print(f"calibration of {arm} stored: {out / 'calibration.json'}; later runs are judged by it")
    return 0


def inherited_lines(labels: list[dict]) -> list[str]:
    return [f"{label['label']}" + (f": {label['reason']}" if label.get("reason") else "")
            + f" (from calibration {label['calibration']})" for label in labels]


def failed_repeats(runs: list[RepeatRun], measured: list[dict[str, CheckRepeat]],
                   previous: dict[str, Calibration | None], arm: str,
                   first: frozenset[str] = frozenset()) -> dict[str, list[int]]:
    """What failed, in which repeats (1-based): as each repeat judged itself (but the `first` checks: an arm's first
    calibration's, judged by judge_first_calibration), and each check's comparisons judged again by the current
    calibration of its key (limits and floor)."""
    failed: dict[str, list[int]] = {}
    for k, (run, checks) in enumerate(zip(runs, measured, strict=True), 1):
        names = failures(run, arm, first)
        for check, current in previous.items():
            here = floor_here(checks[check].record.floor_path) if check in checks else None
            if current is not None and check in checks and against_current(
                    check, checks[check].comparisons, current, load_floor(here, check), here, checks[check].record):
                names.append(check)
        for name in dict.fromkeys(names):
            failed.setdefault(name, []).append(k)
    return failed


def judged_against(previous: dict[str, Calibration | None], unreadable: list[str] = ()) -> str:
    ids = sorted({c.calibration for c in previous.values() if c is not None})
    if unreadable:  # never "first": a calibration was there, and only --trust replaces it
        return (f"gates.yaml (the current calibration cannot be read: {'; '.join(unreadable)})"
                + (f" and the current calibration {', '.join(ids)}" if ids else ""))
    if not ids:
        return "gates.yaml (the arm's first calibration: no calibration to judge its repeats)"
    return f"the current calibration {', '.join(ids)}"


def failed_names(failed: dict[str, list[int]]) -> str:
    """'teacher_forcing in repeats 1, 2; graph_replay in repeat 2'"""
    return "; ".join(f"{name} in repeat{'s' if len(ks) > 1 else ''} {', '.join(map(str, ks))}"
                     for name, ks in sorted(failed.items()))


def refusal(arm: str, ident: str, failed: dict[str, list[int]], moves: list[str], judges: str,
            run_dirs: list[Path], unreadable: list[str] = (), first: list[str] = ()) -> str:
    """The one message of a calibration refused for what --trust may override (`first`: judge_first_calibration's
    sentences)."""
    parts = []
    if unreadable:
        parts.append(f"the current calibration cannot judge ({'; '.join(unreadable)}), so nothing measured judged "
                     "its repeats, and such a calibration is replaced only by an act of trust")
    if first:
        parts.append(f"its repeats failed as the arm's first calibration: {'; '.join(first)}")
    if failed:
        parts.append(f"its repeats failed against {judges}: {failed_names(failed)}")
    if moves:
        parts.append("; ".join(moves))
    runs = " ".join(str(d) for d in run_dirs)
    return (f"calibrate {arm} ({ident}) refused: {'; '.join(parts)}. A calibration replaces the current one only when "
            "its own repeats pass against it: find the fault in the build, or store it anyway, stating why, with "
            f"`python -m harness calibrate --arm {arm} --id {ident} --from-runs {runs} --trust \"REASON\"` (the "
            "repeats are kept; the reason is kept in the calibration and the history and printed on every line it "
            "judges). Nothing was written")


@dataclass(frozen=True)
class CheckCalibration:
    """What calibrate_check derived for one check; nothing is written until every check of the calibration stands
    (store_calibration writes `calibration`, `floor` and `source` at `path`, and `row` into the table)."""

    path: Path  # the key's directory in this machine's reference store
    calibration: Calibration
    floor: list[RequestComparison]
    source: dict
    row: dict  # the table's row (reports/<id>/calibration.json and .md)
    # why this calibration may not be stored: a derived value above its ceiling (--trust cannot override it) ...
    ceilings: tuple[str, ...] = ()
    # ... and a limit that moved more than the stated factor from `previous` (--trust overrides it)
    moves: tuple[str, ...] = ()


def current_calibration(floor_path: str, check: str, ceilings: CalibrationGates,
                        where: str) -> tuple[Calibration | None, str | None]:
    """The calibration stored for this key now, the one a new calibration would replace, or (None, None) for the
    first; (None, the file and why) where one is stored that cannot judge (unreadable, edited, unsealed, above a
    ceiling: refcheck/judging/standing.py): the chain of trust is broken there, so replacing it takes --trust."""
    try:
        return standing_calibration(floor_here(floor_path), check, ceilings, where), None
    except CalibrationUnreadable as exc:
        return None, str(exc)


def gates_file() -> Path:
    return GATES_FILE.relative_to(REPO_ROOT) if GATES_FILE.is_relative_to(REPO_ROOT) else GATES_FILE


@dataclass(frozen=True)
class CalibrationSource:
    """What every check of one calibration records it came from: its name, when it was made, its repeats and the vLLM
    versions they ran."""

    ident: str
    when: str
    run_dirs: tuple[Path, ...]
    vllm: tuple[str, ...]


def calibrate_check(check: str, per_repeat: list[CheckRepeat], gates: ReferenceCheckGates, source: CalibrationSource,
                    previous: Calibration | None, ceilings: CalibrationGates | None = None, *,
                    family: Family | None = None, level: AnchorLevel | None = None) -> CheckCalibration:
    """One check's limits, floor and false-positive statement from its clean repeats, with what refuses them:
    `ceilings` (None: the arm's gates.yaml `calibration`) and the moves from `previous` (None: a first calibration).
    Limits and the held-out statement at `family`'s budget (the run's: every check calibrated for the arm; None: the
    catalogue's); `level`: the repeats' float32 anchor, stored for every later run's (judge/fp32_anchor.py)."""
    first = per_repeat[0].record
    ceilings = load_gates(first.arm).calibration if ceilings is None else ceilings
    paths = {r.record.floor_path for r in per_repeat}
    if len(paths) != 1:
        raise ConfigError(f"calibrate: {check}'s floor key changed between repeats ({', '.join(sorted(paths))}): the "
                          "arm, its reference outputs or vLLM changed during the calibration; calibrate again")
    repeats = [r.comparisons for r in per_repeat]
    least = ReferenceCheckGates().drift_limit  # the seed's 1e-2
    s = spread(repeats)
    if s.nonfinite:
        raise ConfigError(f"calibrate: {check} returned {s.nonfinite} non-finite logprob(s) in clean repeats: that is "
                          "a fault, not noise; nothing was calibrated")
    limits = derive_limits(s, least, gates.tie_gap, family)
    fp = false_positives(repeats, least, gates.tie_gap, over_limits, family)
    repetition = [d for r in per_repeat for d in r.repetition_deltas]
    deltas = (max((d[0] for d in repetition), default=None), max((d[1] for d in repetition), default=None))
    above = ceiling_violations(check, limits, s, ceilings, f"{gates_file()}, arm {first.arm}", deltas)
    moved = limit_moves(check, limits, None if previous is None else
                        Limits(previous.drift_limit, previous.tie_gap, previous.derivation),
                        ceilings.max_move_factor, ceilings.logit_step)
    moves = run_to_run_deviations(s.request_drifts)
    spread_fields = {**{k: v for k, v in asdict(s).items() if k != "request_drifts"}, "flip_gaps": s.flip_gaps[-20:],
                     # what the run-level floor test judges later runs by (drift_floor.judge_run_level)
                     "floor_shifts": held_out_shifts(repeats),
                     "run_to_run_move_max": max(map(abs, moves), default=None),
                     "span_fraction_delta_max": deltas[0], "distinct_2_delta_max": deltas[1],
                     **({"fp32": level.fields()} if level is not None else {})}
    # margin 0: none is added (harness/judge/calibration.py MARGIN_MEASURED says why)
    calibration = Calibration(check, limits.drift_limit, limits.tie_gap, len(repeats), 0.0, limits.derivation,
                              fp.sentence, source.when, source.ident, spread_fields)
    recorded = {"calibration": source.ident, "repeats": len(repeats), "runs": [d.name for d in source.run_dirs],
                "arm": first.arm, "reference": first.reference, "reference_key": first.reference_key,
                "vllm": list(source.vllm)}
    row = {"check": check, "reference": first.reference, "before": {"drift_limit": gates.limit_for(check),
                                                                     "tie_gap": gates.tie_gap},
           "after": {"drift_limit": limits.drift_limit, "tie_gap": limits.tie_gap}, "derivation": limits.derivation,
           "false_positives": {"sentence": fp.sentence, "short": fp.short, "deterministic": fp.deterministic,
                               "repeats": fp.repeats, "passed": fp.repeats - fp.failed_repeats,
                               "failed_repeats": fp.failed_repeats, "repeat_ci": fp.repeat_interval,
                               "requests": fp.requests, "requests_over": fp.requests_over,
                               "request_ci": fp.request_interval, "failures": fp.failures},
           "ceilings": above, "moves": moved, "spread": spread_fields, "floor_path": str(floor_here(first.floor_path))}
    return CheckCalibration(floor_here(first.floor_path), calibration, mean_floor(repeats), recorded, row,
                            tuple(above), tuple(moved))


def over_limits(c: RequestComparison, limits: Limits) -> bool:
    return failure_line(c, limits.drift_limit, limits.tie_gap) is not None


def held_out(fp: dict) -> str:
    """The table cell of a check's false-positive statement: "deterministic (K)" or "x/K repeats (95 % CI), y of N
    requests" (the requests are no independent trials: no interval)."""
    if fp["deterministic"]:
        return f"deterministic over {fp['repeats']} (bit-identical)"
    if fp["repeat_ci"] is None:
        return "none held out"
    return (f"{fp['failed_repeats']}/{fp['repeats']} repeats ({percent(fp['repeat_ci'])}), {fp['requests_over']} of "
            f"{fp['requests']} requests")


def calibration_table(arm: str, ident: str, rows: list[dict]) -> str:
    lines = [f"### Calibration of {arm} ({ident})", "",
             "| Check (vs) | K | Exact | Clean max drift | p99 position | Divergences (largest gap) | Limit before -> "
             "after | Tie gap before -> after | False positives (held out) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, fp = r["spread"], r["false_positives"]
        p99 = "n/a" if s["drift_p99"] is None else f"{s['drift_p99']:.3g}"
        flips = f"{s['divergences']}" + (f" ({max(s['flip_gaps']):.3g})" if s["flip_gaps"] else "")
        lines.append(f"| {r['check']} ({r['reference']}) | {s['repeats']} | {s['exact_rate']:.0%} | "
                     f"{s['max_drift']:.3g} | {p99} | {flips} | {r['before']['drift_limit']:g} -> "
                     f"{r['after']['drift_limit']:.3g} | {r['before']['tie_gap']:g} -> {r['after']['tie_gap']:.3g} | "
                     f"{held_out(fp)} |")
    lines += ["", "Limits: " + "; ".join(f"{r['check']}: {r['derivation']}" for r in rows), ""]
    refused = [s for r in rows for s in r.get("ceilings", []) + r.get("moves", [])]
    lines += ["Refused: " + "; ".join(refused), ""] if refused else []
    return "\n".join(lines)
