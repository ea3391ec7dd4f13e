"""One reference check of one candidate in one run (ReferenceCheck): which limits judge it, and its paired test
against the pair's floor (prefix_reuse, graph_replay, teacher_forcing, output_coverage and long_context against the
reference store; long_prefix's timed outputs and spec_decode's equality against the reference arm of the same run).

A check calibrated for this key (`harness calibrate`: candidate config and the reference outputs' noise key, no vLLM
version: a new build is judged by the last trusted calibration) is judged by the calibration's limits and paired with
its mean floor; one without a calibration by gates.yaml and, where a run was accepted (`harness accept-floor`), paired
with that run. Under `require_floor` a check with neither fails: "not calibrated: run calibrate". A calibration's own
repeats are judged by the current calibration of the key like any run (the chain of trust: a new calibration must
pass against the one it replaces); an arm's first calibration's repeats by gates.yaml's limits, without
`require_floor`. The line that says what judged a check names an arm's first calibration ("first calibration"), a
calibration trusted by hand (its reason) and the labels a calibration inherited from an unconfirmed one it replaced,
until a run confirms it (harness/calibrate/trust.py), and a run on the calibration's own build. A calibration that was
edited, is unsealed or exceeds the run's ceilings judges nothing: its checks FAIL "no data"
(refcheck/judging/standing.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.config.arms import Arm, load_arm
from harness.config.thresholds import CalibrationGates, DegenerationGates, Gates, ReferenceCheckGates, load_gates
from harness.judge.degeneration import clean_flips, too_many_tie_flips
from harness.judge.drift_floor import judge_floor_pairing
from harness.judge.error_budget import Family, RunBudget, unit_of
from harness.judge.fp32_anchor import ANCHORED_CHECK, stored_level
from harness.records.manifest import CalibrationRepeat
from harness.records.schema import ReferenceCheckFields, RequestComparison
from harness.refcheck.judging.run_anchor import run_anchor
from harness.refcheck.judging.standing import standing_calibration
from harness.refcheck.store.floor_store import (
    Calibration,
    CalibrationUnreadable,
    floor_dir,
    floor_key,
    load_confirmation,
    load_floor,
)
from harness.refcheck.store.reference_store import reference_dir


@dataclass(frozen=True)
class CheckLimits:
    """The limits one check of one run is judged by, and where they came from."""

    check: str
    arm: str
    drift_limit: float
    tie_gap: float
    require_floor: bool
    floor_path: Path
    calibration: Calibration | None  # None: gates.yaml's limits
    repeat: CalibrationRepeat | None = None  # this run is a repeat of `harness calibrate`
    problem: str | None = None  # the calibration stored for the key cannot be read: the check cannot be judged
    confirmed: bool = False  # a run of another build passed against the calibration (a first one's label goes)
    own_build: bool = False  # this run's build is the one the calibration measured
    # a repeat's key holds a calibration that cannot be read: judged by gates.yaml, and the calibration made of it
    # replaces the unreadable one only with --trust (harness/calibrate/command.py)
    unreadable: str | None = None

    @property
    def judged_by(self) -> str:
        if self.problem is not None:
            return f"unreadable calibration: {self.problem}"
        if self.calibration is None and self.repeat is not None:
            why = (f"the current calibration cannot be read ({self.unreadable}): replacing it takes `calibrate "
                   "--trust \"REASON\"`" if self.unreadable else "the arm's first calibration, no calibration to "
                   "judge it by")
            return (f"gates.yaml (calibration {self.repeat.id}, repeat {self.repeat.repeat} of {self.repeat.of}: "
                    f"{why}): limit {self.drift_limit:g}, tie gap {self.tie_gap:g}")
        if self.calibration is None:
            return f"gates.yaml, not calibrated: limit {self.drift_limit:g}, tie gap {self.tie_gap:g}"
        return self.calibration.short + "".join(f"; {label}" for label in self.labels)

    @property
    def labels(self) -> list[str]:
        """What a reader must know of the calibration that judged the check, beside its limits."""
        c, out = self.calibration, []
        if c is None:
            return out
        if not self.confirmed:  # first, trusted by hand, or inherited from such: until a run confirms it
            out += c.label_lines
        if self.own_build:
            out.append("run on the calibration's own build")
        if self.repeat is not None:
            out.append(f"this run: repeat {self.repeat.repeat} of {self.repeat.of} of calibration {self.repeat.id}")
        return out


def check_limits(gates: ReferenceCheckGates, arm: Arm, check: str, noise_key: str,
                 repeat: CalibrationRepeat | None = None, build: str | None = None,
                 ceilings: CalibrationGates | None = None) -> CheckLimits:
    """`check`'s limits for this candidate against reference outputs of this noise key (refcheck.store
    ReferenceKey.noise_key): its calibration's where one is stored under the key, else gates.yaml's
    (capacity_outputs_c8 goes by capacity_outputs). A planted-fault variant (`calibration_from: ARM`) looks under that
    arm's key: it is judged as the build without the fault would be. A calibration repeat is judged by the current
    calibration like any run; with none (the arm's first calibration), or one that cannot be read (its replacement then
    needs `calibrate --trust`), by gates.yaml without `require_floor`. `build`: this run's build hash of the arm
    (harness/plan/build.py), None where unknown. A calibration that was edited, is unsealed or is above a ceiling of
    `ceilings` (the run's gates; None: the keyed arm's gates.yaml) is a problem, as an unreadable one is
    (refcheck/judging/standing.py)."""
    keyed = load_arm(arm.calibration_from) if arm.calibration_from else arm
    path = floor_dir(reference_dir(), keyed.name, floor_key(keyed, noise_key))
    ceilings = load_gates(keyed.name).calibration if ceilings is None else ceilings
    try:
        calibration = standing_calibration(path, check, ceilings, f"the run's gates, arm {keyed.name}")
    except CalibrationUnreadable as exc:
        if repeat is not None:  # judged by gates.yaml, so calibrate can name real failures; it then needs --trust
            return CheckLimits(check, arm.name, gates.limit_for(check), gates.tie_gap_for(check), False, path, None,
                               repeat, unreadable=str(exc))
        return CheckLimits(check, arm.name, gates.limit_for(check), gates.tie_gap_for(check), gates.require_floor,
                           path, None, repeat, problem=str(exc))
    if calibration is not None:
        built = (calibration.build or {}).get("build_hash")
        return CheckLimits(check, arm.name, calibration.drift_limit, calibration.tie_gap, gates.require_floor, path,
                           calibration, repeat, confirmed=load_confirmation(path, calibration) is not None,
                           own_build=build is not None and build == built)
    return CheckLimits(check, arm.name, gates.limit_for(check), gates.tie_gap_for(check),
                       gates.require_floor and repeat is None, path, None, repeat)


@dataclass(frozen=True)
class FloorVerdict:
    """A check's paired test against its pair's floor: the record's floor fields, and `failure` (the sentence that
    fails the check, None when it stands) as a field of its own, never read back from the sentence."""

    floor_path: str
    judged_by: str
    floor: str
    detectable: str | None
    failure: str | None = None

    def fields(self) -> dict:
        return {"floor_path": self.floor_path, "judged_by": self.judged_by, "floor": self.floor,
                "detectable": self.detectable}


def judge_floor(check: str, reference: str, comparisons: list[RequestComparison], aborted: bool,
                limits: CheckLimits) -> FloorVerdict:
    """The paired test against the floor at limits.floor_path. A floor that is missing under require_floor, a
    calibration that cannot be read, or a run the floor refutes fails the check; a calibration repeat is paired with
    the current calibration's floor like any run (the arm's first calibration's repeats: with an accepted floor where
    there is one, else with none)."""
    where = dict(floor_path=str(limits.floor_path), judged_by=limits.judged_by)
    if limits.problem is not None:  # never judged by gates.yaml in its place: the run would be silently looser
        failure = (f"FAIL (no data: calibration {limits.problem}: it cannot judge; restore the file as calibrate wrote "
                   f"it, or replace it, stating why: `python -m harness calibrate --arm {limits.arm} --trust "
                   "\"REASON\"`)")
        return FloorVerdict(**where, floor=failure, detectable="none: no calibration to judge against",
                            failure=failure)
    floor = load_floor(limits.floor_path, check)
    if floor is None and limits.repeat is not None:
        whose = "the current calibration cannot be read" if limits.unreadable else "the arm's first calibration"
        return FloorVerdict(**where, floor=f"calibration repeat {limits.repeat.repeat} of {limits.repeat.of}: no "
                            f"calibration or accepted floor to pair with ({whose}: judged by "
                            "gates.yaml's limits alone)", detectable="no shift below the fixed drift limit (no floor "
                            "to pair with)")
    if floor is None:
        # the one command that works: under require_floor this run fails, and accept-floor refuses a failing run
        also = "" if limits.require_floor else (" (or accept a known-good run with `python -m harness accept-floor "
                                                "--run RUN`)")
        missing = (f"not calibrated: no calibration or accepted floor for {check} of {limits.arm} vs {reference} at "
                   f"{limits.floor_path}: run `python -m harness calibrate --arm {limits.arm}` on a good build{also}")
        sentence = f"FAIL (no data: {missing})" if limits.require_floor else missing
        return FloorVerdict(**where, floor=sentence, detectable="no shift below the fixed drift limit (no floor to "
                            "pair with)", failure=sentence if limits.require_floor else None)
    if aborted:
        failure = "FAIL (no data: the check was aborted; the paired test needs every request)"
        return FloorVerdict(**where, floor=failure, detectable=None, failure=failure)
    budget = run_budget(limits)
    if limits.calibration is not None:  # the report's Judged-by line states the run's budget
        where["judged_by"] += f"; {budget.text}"
    judged = judge_floor_pairing(comparisons, floor.comparisons, floor.name, clean_shifts(limits.calibration), budget)
    return FloorVerdict(**where, floor=judged.sentence, detectable=judged.detectable,
                        failure=None if judged.passed else judged.sentence)


@dataclass(frozen=True)
class JudgedCheck:
    """A check's record fields with its floor's verdict and the tie-flip cap applied; `floor_failure`: the floor's
    failing sentence (also listed in the fields' divergences), None where the floor stands."""

    fields: ReferenceCheckFields
    floor_failure: str | None = None


@dataclass(frozen=True)
class ReferenceCheck:
    """One reference check of one candidate in one run, built once (reference_check): the limits it is judged by
    (calibrated, or gates.yaml's) and gates.yaml's degeneration section (the tie-flip cap's clean counts). Every
    reference check -- long_context, prefix_reuse, graph_replay, teacher_forcing, output_coverage, long_prefix's
    outputs, spec_decode's equality -- records what `judge` returns."""

    limits: CheckLimits
    degeneration: DegenerationGates = field(default_factory=DegenerationGates)

    @property
    def drift_limit(self) -> float:
        return self.limits.drift_limit

    @property
    def tie_gap(self) -> float:
        return self.limits.tie_gap

    @property
    def calibrated_spread(self) -> dict | None:
        """The calibration's clean spread (the degeneration detector's calibrated counts); None: not calibrated."""
        return self.limits.calibration.spread if self.limits.calibration else None

    def judge(self, fields: ReferenceCheckFields, comparisons: list[RequestComparison],
              aborted: bool) -> JudgedCheck:
        """The record's fields plus the paired test against the floor and the cap on tie flips; a failure of either
        fails the check and is listed with the divergences."""
        verdict = with_anchor(judge_floor(fields.check, fields.reference, comparisons, aborted, self.limits),
                              fields, comparisons, aborted, self.limits)
        return JudgedCheck(cap_tie_flips(apply_floor(fields, verdict), self.limits, self.degeneration),
                           verdict.failure)


def reference_check(gates: Gates, arm: Arm, check: str, noise_key: str, repeat: CalibrationRepeat | None = None,
                    build: str | None = None) -> ReferenceCheck:
    """`check` of candidate `arm` against reference outputs of this noise key, judged by the run's recorded `gates`
    (check_limits: calibrated, or reference_checks'; the tie-flip cap from degeneration's)."""
    limits = check_limits(gates.reference_checks, arm, check, noise_key, repeat, build, gates.calibration)
    return ReferenceCheck(limits, gates.degeneration)


def with_anchor(verdict: FloorVerdict, fields: ReferenceCheckFields, comparisons: list[RequestComparison],
                aborted: bool, limits: CheckLimits) -> FloorVerdict:
    """The floor's verdict and, where the check's calibration anchors it to float32 (a generated model's teacher
    forcing: judge/fp32_anchor.py), the run's anchor beside it; either failing fails the check."""
    level = stored_level(limits.calibration.spread) if limits.calibration is not None else None
    if level is None or fields.check != ANCHORED_CHECK or aborted or limits.problem is not None:
        return verdict
    anchor = run_anchor(reference_dir(), fields.reference, fields.reference_key, limits.arm, comparisons, level,
                        run_budget(limits))
    failures = [f for f in (verdict.failure, None if anchor.passed else anchor.sentence) if f]
    return replace(verdict, floor=f"{verdict.floor}; {anchor.sentence}",
                   detectable=f"{verdict.detectable}; {anchor.detectable}" if verdict.detectable else anchor.detectable,
                   failure="; ".join(failures) or None)


def cap_tie_flips(fields: ReferenceCheckFields, limits: CheckLimits,
                  degeneration: DegenerationGates) -> ReferenceCheckFields:
    """A reference check exempts a divergence within its tie gap (compare.is_tie_flip), so a fault that flips only
    at near-ties would pass it: their number is capped as the degeneration detector's is, against the check's own
    calibrated clean count (its spread), else gates.yaml degeneration's measured counts. Above the cap the check
    fails "too many tie flips", listed with the divergences (once: graph_replay's degeneration lines carry it too).
    A calibrated check's cap is one part of its share of the run's budget (run_budget); gates.yaml's alpha else."""
    clean = clean_flips(degeneration, limits.calibration.spread if limits.calibration else None)
    alpha = run_budget(limits).part("tie-flip cap") if limits.calibration is not None else degeneration.tie_flip_alpha
    failure = too_many_tie_flips(fields.tie_flips or 0, fields.requests, clean, alpha)
    if failure is None:
        return fields
    diverged = fields.diverged if failure in fields.diverged else [*fields.diverged, failure]
    return fields.model_copy(update={"passed": False, "diverged": diverged})


def apply_floor(fields: ReferenceCheckFields, verdict: FloorVerdict) -> ReferenceCheckFields:
    """The check with the floor's verdict: its failure fails the check, listed with the divergences."""
    failed = {"passed": False, "diverged": [*fields.diverged, verdict.failure]} if verdict.failure else {}
    return fields.model_copy(update={**verdict.fields(), **failed})


def clean_shifts(calibration: Calibration | None) -> list[float] | None:
    """The held-out run-level shifts a calibration measured (its floor test: drift_floor.judge_floor_pairing); None for
    an accepted run's floor or a calibration stored before they were."""
    return None if calibration is None else calibration.spread.get("floor_shifts")


def run_budget(limits: CheckLimits) -> RunBudget:
    """The check's share of its run's 1 % (harness/judge/error_budget.py): see budget_at; split one part more where
    its calibration anchors it to float32 (judge/fp32_anchor.py)."""
    budget = budget_at(limits.floor_path, limits.calibration)
    anchored = limits.check == ANCHORED_CHECK and limits.calibration is not None and stored_level(
        limits.calibration.spread) is not None
    return replace(budget, anchored=anchored)


def budget_at(here: Path, calibration: Calibration | None) -> RunBudget:
    """The family is every check calibrated for the arm whose key directory is `here` (family_at); the rounding unit
    is the calibration's own."""
    return RunBudget(family_at(here), unit_of(calibration.spread if calibration else None))


def family_at(here: Path, also: Iterable[str] = ()) -> Family:
    """Every check calibrated for the arm whose key directory is `here`, over all its keys' directories
    (<arm>-<16 hex>: each prompt set's noise key), i.e. every check a run of the arm can judge by a calibration, and
    `also` (the checks a calibration is deriving now)."""
    arm = here.name[:-17]
    names = {f.name.removesuffix(".calibration.json") for d in here.parent.glob(f"{arm}-*")
             if re.fullmatch(re.escape(arm) + "-[0-9a-f]{16}", d.name) for f in d.glob("*.calibration.json")}
    names |= set(also)
    return (Family(len(names), f"the checks calibrated for {arm}") if names else
            Family(1, f"no check calibrated for {arm}: this check alone"))
