"""`harness calibrate --arm A`'s repeats: each a QualifyRequest (the calibrated suites, its own order seed, one length
seed for all, the repeat marker ID:K/N) run as a full `qualify` in a fresh interpreter (the CLI's runner: the servers
start anew, CUDA graphs are captured again), then the calibration derived from them and stored
(harness/calibrate/command.py store_calibration).

Each repeat runs in reports/<id>-r<k>; running the same command again keeps the repeats that ran to their end and runs
the rest. The checks send their prompts under the repeat's order seed (another batch composition and arrival order,
harness/refcheck/prompts/order.py), the server runs the arm under the repeat's variant (harness/config/variants.py: CUDA
graphs vs eager, batch-invariant kernels, another chunked-prefill budget; recorded in run.json), and
`HARNESS_CALIBRATION_REPEAT=k` is in the repeat's (so its servers') environment for builds whose noise is seeded per
run (the CPU jitter of harness/faults/length_faults). The repeat marker travels in the request, never on a command
line (qualify refuses it there)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.admission.request import QualifyRequest
from harness.calibrate.command import not_a_variant, store_calibration
from harness.calibrate.repeats import variants_line
from harness.calibrate.trust import check_id, check_trust
from harness.config.arms import Arm, load_arm
from harness.config.errors import ConfigError
from harness.config.paths import REPORTS_DIR
from harness.config.suites import calibrated_suites
from harness.config.thresholds import load_gates
from harness.config.variants import describe, plan_variant
from harness.records.manifest import interruption, load_manifest

# A repeat's request and the environment its process adds -> its exit code.
RunRepeat = Callable[[QualifyRequest, dict[str, str]], int]

DEFAULT_REPEATS = 3  # where the arm's calibration.min_repeats asks for fewer


@dataclass(frozen=True)
class CalibrateRequest:
    """What `calibrate` was asked: the arm, K, the suites, the calibration's name and --trust; and what each repeat's
    qualify takes over (--reference, --set, --no-vllm-check, --strict, the command line for run.json)."""

    arm: str
    repeats: int | None = None  # None: the arm's calibration.min_repeats, at least DEFAULT_REPEATS
    suites: tuple[str, ...] | None = None  # None: every calibrated suite
    ident: str | None = None  # None: calibrate-<arm>-<time>
    trust: str | None = None
    reference: str | None = None
    overrides: tuple[str, ...] = ()
    vllm_check: bool = True
    strict: bool = False
    argv: tuple[str, ...] = ()


def calibrate(asked: CalibrateRequest, run_repeat: RunRepeat, candidate: Arm | None = None) -> int:
    """Every refusal that needs no repeat first (the name, the suites, K, the reference), then the K repeats (kept
    whatever their verdict: --from-runs can store them), then the calibration (store_calibration). `candidate`: the
    arm as the command loaded it (with --set)."""
    arm = asked.arm
    ident = check_id(asked.ident or f"calibrate-{arm}-{time.strftime('%Y%m%d-%H%M%S')}")
    trust = check_trust(asked.trust)
    candidate = not_a_variant(arm, candidate or load_arm(arm))
    chosen = chosen_suites(asked.suites)
    need = load_gates(arm).calibration.min_repeats
    repeats = asked.repeats if asked.repeats is not None else max(DEFAULT_REPEATS, need)
    if repeats < need:
        raise ConfigError(f"calibrate --repeats {repeats}: arm {arm} calibrates with at least {need} repeats "
                          f"(gates.yaml calibration.min_repeats); give --repeats {need} or more")
    if not (asked.reference or candidate.reference):
        raise ConfigError(f"calibrate --arm {arm}: the arm names no reference arm (`reference:`), and a calibration "
                          "measures a candidate's noise against its reference: set it in the arm's YAML or give "
                          "--reference; no repeat was run")
    run_dirs = [REPORTS_DIR / f"{ident}-r{k}" for k in range(1, repeats + 1)]
    states = [repeat_state(d, ident, k, repeats) for k, d in enumerate(run_dirs, 1)]
    for k, (run_dir, state) in enumerate(zip(run_dirs, states, strict=True), 1):
        if state == "foreign":  # before any repeat runs: not after hours of them
            raise ConfigError(f"calibrate --id {ident}: {run_dir} holds a run that is not repeat {k} of {repeats} of "
                              "this calibration; choose another --id (nothing was run or deleted)")
    for k, (run_dir, state) in enumerate(zip(run_dirs, states, strict=True), 1):
        if state == "finished":  # the same calibration run again: continue it
            print(f"calibrate {arm}: repeat {k} of {repeats} kept from an earlier call: {run_dir}", flush=True)
            continue
        if state == "partial":  # an interrupted repeat: its partial records would mix with the new ones
            shutil.rmtree(run_dir)
        variant = describe(candidate, plan_variant(candidate, k))
        print(f"calibrate {arm}: repeat {k} of {repeats} -> {run_dir} (variant {variant})", flush=True)
        code = run_repeat(repeat_request(asked, chosen, run_dir, ident, k, repeats),
                          {"HARNESS_CALIBRATION_REPEAT": str(k)})
        if code >= 128 or code == 2:
            raise ConfigError(f"calibrate: repeat {k} ({run_dir}) exited {code} "
                              f"({'interrupted' if code >= 128 else 'refused before its checks ran'}); nothing was "
                              "calibrated")
    print(f"calibrate {arm}: {variants_line(run_dirs)}", flush=True)
    return store_calibration(arm, ident, run_dirs, trust=trust, candidate=candidate)


def repeat_request(asked: CalibrateRequest, suites: list[str], run_dir: Path, ident: str, k: int,
                   repeats: int) -> QualifyRequest:
    """Repeat k of `repeats` as qualify's request: order seed k, one length seed for every repeat (the reference's
    sweep outputs are captured once, not per repeat), the marker ID:K/N (admission.record.admitted_repeat)."""
    return QualifyRequest(arm=asked.arm, reference=asked.reference, run_dir=str(run_dir), suites=",".join(suites),
                          order_seed=k, length_seed=1, calibration_repeat=f"{ident}:{k}/{repeats}",
                          overrides=asked.overrides, vllm_check=asked.vllm_check, strict=asked.strict,
                          argv=asked.argv)


def chosen_suites(suites: tuple[str, ...] | list[str] | None) -> list[str]:
    """--suites as the calibrated suites they name; a name that is not one is refused, naming the ones it takes."""
    takes = calibrated_suites()
    other = [s for s in suites or [] if s not in takes]
    if other:
        raise ConfigError(f"calibrate --suites {','.join(suites or [])}: {', '.join(repr(s) for s in other)} "
                          f"{'is' if len(other) == 1 else 'are'} not a suite with checks to calibrate; calibrate takes "
                          f"{', '.join(takes)}; no repeat was run")
    return calibrated_suites(list(suites) if suites is not None else None)


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
