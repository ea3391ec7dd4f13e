"""`harness calibrate --arm A`: run the arm's output checks K times against its stored reference on a build taken as
good, then derive and store each check's limits and floor (harness/judge/calibration.py) under the key later runs
look for (candidate config, reference outputs, vLLM: harness/refcheck/floor_store.py).

Each repeat is a full `qualify` of the calibrated suites in a fresh process (reports/<id>-r<k>; running the same
command again keeps the repeats that ran to their end and runs the rest): the servers start anew (CUDA graphs are
captured again), the checks send their prompts under another order seed (another batch composition and arrival
order, harness/refcheck/order.py), and `HARNESS_CALIBRATION_REPEAT=k` is in the servers' environment for builds whose
noise is seeded per run (the CPU jitter of harness/faults/length_faults.py). The repeats are judged by gates.yaml alone;
their exit codes say nothing about the calibration, their completeness does.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.calibrate.repeats import CheckRepeat, read_repeat
from harness.config.errors import ConfigError
from harness.config.paths import GATES_FILE, REPO_ROOT, REPORTS_DIR
from harness.config.suites import calibrated_suites
from harness.config.thresholds import CalibrationGates, ReferenceCheckGates, load_gates
from harness.judge.calibration import (
    Limits,
    ceiling_violations,
    derive_limits,
    false_positives,
    limit_moves,
    mean_floor,
    percent,
    run_to_run_deviations,
    spread,
)
from harness.records.manifest import interruption, load_manifest
from harness.records.results import read_results
from harness.records.schema import RequestComparison, ServerRecord
from harness.refcheck.accept_floor import floor_here
from harness.refcheck.compare import failure_line
from harness.refcheck.floor_store import Calibration, CalibrationUnreadable, load_calibration, save_calibration

# A repeat's qualify argv (after `python -m harness`) and extra environment -> its exit code.
RunRepeat = Callable[[list[str], dict[str, str]], int]


def calibrate(arm: str, repeats: int, suites: list[str] | None, qualify_args: list[str], run_repeat: RunRepeat,
              ident: str | None = None) -> int:
    ident = ident or f"calibrate-{arm}-{time.strftime('%Y%m%d-%H%M%S')}"
    chosen = calibrated_suites(suites)
    if not chosen:
        raise ConfigError(f"calibrate --suites {','.join(suites or [])}: none of them has checks to calibrate; "
                          f"choose among {', '.join(calibrated_suites())}")
    run_dirs = []
    for k in range(1, repeats + 1):
        run_dir = REPORTS_DIR / f"{ident}-r{k}"
        run_dirs.append(run_dir)
        state = repeat_state(run_dir, ident, k, repeats)
        if state == "finished":  # the same calibration run again: continue it
            print(f"calibrate {arm}: repeat {k} of {repeats} kept from an earlier call: {run_dir}", flush=True)
            continue
        if state == "foreign":
            raise ConfigError(f"calibrate --id {ident}: {run_dir} holds a run that is not repeat {k} of {repeats} of "
                              "this calibration; choose another --id (nothing was deleted)")
        if state == "partial":  # an interrupted repeat: its partial records would mix with the new ones
            shutil.rmtree(run_dir)
        print(f"calibrate {arm}: repeat {k} of {repeats} -> {run_dir}", flush=True)
        argv = ["qualify", "--arm", arm, "--suites", ",".join(chosen), "--run-dir", str(run_dir),
                "--order-seed", str(k), "--calibration-repeat", f"{ident}:{k}/{repeats}",
                # one sweep for every repeat: the reference's sweep outputs are captured once, not per repeat
                "--length-seed", "1", *qualify_args]
        code = run_repeat(argv, {"HARNESS_CALIBRATION_REPEAT": str(k)})
        if code >= 128 or code == 2:
            raise ConfigError(f"calibrate: repeat {k} ({run_dir}) exited {code} "
                              f"({'interrupted' if code >= 128 else 'refused before its checks ran'}); nothing was "
                              "calibrated")
    return store_calibration(arm, ident, run_dirs)


def repeat_state(run_dir: Path, ident: str, k: int, repeats: int) -> str:
    """"finished": repeat k of this calibration (same id and count) ran to its end, and is kept (a calibration cut
    short by a device call's limit or Ctrl-C continues when the same command runs again); "partial": it was cut, or
    the directory holds nothing yet; "absent"; "foreign": another run, which is never deleted."""
    if not run_dir.exists():
        return "absent"
    manifest, _ = load_manifest(run_dir)
    if manifest is None:
        return "partial" if not (run_dir / "results.jsonl").exists() else "foreign"
    c = manifest.calibration
    if c is None or (c.id, c.repeat, c.of) != (ident, k, repeats):
        return "foreign"
    return "partial" if interruption(manifest) else "finished"


def store_calibration(arm: str, ident: str, run_dirs: list[Path]) -> int:
    """Every check measured by all repeats: derived, stored, tabled (reports/<ident>/calibration.md and .json)."""
    measured = [read_repeat(d, arm) for d in run_dirs]
    vllm = vllm_versions(run_dirs, arm)
    checks = sorted(set.intersection(*(set(m) for m in measured)))
    partial = sorted(set.union(*(set(m) for m in measured)) - set(checks))
    if partial:
        raise ConfigError(f"calibrate: {', '.join(partial)} did not run in every repeat; a calibration compares like "
                          "with like: calibrate again")
    gates = load_gates(arm).reference_checks
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    derived = [calibrate_check(check, [m[check] for m in measured], gates, ident, when, run_dirs, vllm,
                               previous_calibration(measured[0][check].record.floor_path, check))
               for check in checks]
    for d in derived:  # written only once every check stands
        save_calibration(d.path, d.calibration, d.floor, d.source)
    rows = [d.row for d in derived]
    out = REPORTS_DIR / ident
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps({"arm": arm, "calibration": ident, "calibrated": when,
                                                      "repeats": [str(d) for d in run_dirs], "vllm": vllm,
                                                      "checks": rows}, indent=1) + "\n")
    table = calibration_table(arm, ident, rows)
    (out / "calibration.md").write_text(table)
    print(table, end="")
    print(f"calibration of {arm} stored: {out / 'calibration.json'}; later runs are judged by it")
    return 0


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


def previous_calibration(floor_path: str, check: str) -> Calibration | None:
    """The calibration stored for this key now, the one a new calibration would replace (None: the first)."""
    try:
        return load_calibration(floor_here(floor_path), check)
    except CalibrationUnreadable:
        return None  # replaced: an unreadable calibration judges nothing


def calibrate_check(check: str, per_repeat: list[CheckRepeat], gates: ReferenceCheckGates, ident: str, when: str,
                    run_dirs: list[Path], vllm: list[str], previous: Calibration | None,
                    ceilings: CalibrationGates | None = None) -> CheckCalibration:
    """One check's limits, floor and false-positive statement from its clean repeats, with what refuses them:
    `ceilings` (None: the arm's gates.yaml `calibration`) and the moves from `previous` (None: a first calibration)."""
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
    limits = derive_limits(s, least, gates.tie_gap)
    fp = false_positives(repeats, least, gates.tie_gap, over_limits)
    gates_file = GATES_FILE.relative_to(REPO_ROOT) if GATES_FILE.is_relative_to(REPO_ROOT) else GATES_FILE
    above = ceiling_violations(check, limits, s, ceilings, f"{gates_file}, arm {first.arm}")
    moved = limit_moves(check, limits, None if previous is None else
                        Limits(previous.drift_limit, previous.tie_gap, previous.derivation),
                        ceilings.max_move_factor, ceilings.logit_step)
    repetition = [d for r in per_repeat for d in r.repetition_deltas]
    moves = run_to_run_deviations(s.request_drifts)
    spread_fields = {**{k: v for k, v in asdict(s).items() if k != "request_drifts"}, "flip_gaps": s.flip_gaps[-20:],
                     "run_to_run_move_max": max(map(abs, moves), default=None),
                     "span_fraction_delta_max": max((d[0] for d in repetition), default=None),
                     "distinct_2_delta_max": max((d[1] for d in repetition), default=None)}
    # margin 0: none is added (harness/judge/calibration.py MARGIN_MEASURED says why)
    calibration = Calibration(check, limits.drift_limit, limits.tie_gap, len(repeats), 0.0, limits.derivation,
                              fp.sentence, when, ident, spread_fields)
    source = {"calibration": ident, "repeats": len(repeats), "runs": [d.name for d in run_dirs], "arm": first.arm,
              "reference": first.reference, "reference_key": first.reference_key, "vllm": vllm}
    row = {"check": check, "reference": first.reference, "before": {"drift_limit": gates.limit_for(check),
                                                                     "tie_gap": gates.tie_gap},
           "after": {"drift_limit": limits.drift_limit, "tie_gap": limits.tie_gap}, "derivation": limits.derivation,
           "false_positives": {"sentence": fp.sentence, "short": fp.short, "deterministic": fp.deterministic,
                               "repeats": fp.repeats, "passed": fp.repeats - fp.failed_repeats,
                               "failed_repeats": fp.failed_repeats, "repeat_ci": fp.repeat_interval,
                               "requests": fp.requests, "requests_over": fp.requests_over,
                               "request_ci": fp.request_interval, "failures": fp.failures},
           "ceilings": above, "moves": moved, "spread": spread_fields, "floor_path": str(floor_here(first.floor_path))}
    return CheckCalibration(floor_here(first.floor_path), calibration, mean_floor(repeats), source, row,
                            tuple(above), tuple(moved))


def over_limits(c: RequestComparison, limits: Limits) -> bool:
    return failure_line(c, limits.drift_limit, limits.tie_gap) is not None


def vllm_versions(run_dirs: list[Path], arm: str) -> list[str]:
    """The vLLM versions the arm's servers reported in the repeats (one, unless the build changed under them)."""
    return sorted({r.vllm_version for d in run_dirs for r in read_results(d / "results.jsonl")[0]
                   if isinstance(r, ServerRecord) and r.arm == arm and r.vllm_version})


def held_out(fp: dict) -> str:
    """The table cell of a check's false-positive statement: "deterministic (K)" or "x/K repeats (95 % CI), y/N
    requests (95 % CI)"."""
    if fp["deterministic"]:
        return f"deterministic over {fp['repeats']} (bit-identical)"
    if fp["repeat_ci"] is None:
        return "none held out"
    return (f"{fp['failed_repeats']}/{fp['repeats']} repeats ({percent(fp['repeat_ci'])}), {fp['requests_over']}/"
            f"{fp['requests']} requests ({percent(fp['request_ci'])})")


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
