"""The arms of a run: the named candidates and every arm they name, each loaded with its scoped --set overrides; the
workloads candidates that share a reference must agree on."""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm, check_references, defining_file, load_arm, override_scope, overrides_for
from harness.config.armset import ArmSet, expand_arm_set, workload_conflicts
from harness.config.errors import ConfigError
from harness.config.kv_twin import twin_name
from harness.config.paths import ARMS_DIR
from harness.config.suites import workload_keys
from harness.config.workloads import workload_for


@dataclass
class RunArms:
    arm_set: ArmSet
    # every arm of the run (candidates with --set applied), the candidates' eager variants and KV-capped twins
    loaded: dict[str, Arm]

    @property
    def candidates(self) -> list[Arm]:
        return [self.loaded[n] for n in self.arm_set.candidates]

    @property
    def candidate(self) -> Arm:
        """The first candidate (`plan` and a single-candidate run have one)."""
        return self.candidates[0]

    @property
    def reference(self) -> Arm | None:
        """The first candidate's reference."""
        ref = self.arm_set.reference_of(self.candidate.name)
        return self.loaded[ref] if ref else None

    @property
    def run_arms(self) -> list[Arm]:
        """The arms with tests of their own (run.json's `arms`): candidates, then references that are no candidate."""
        return [self.loaded[n] for n in self.arm_set.arms]

    @property
    def variants(self) -> list[Arm]:
        """Eager variants the candidates name (graph_replay launches them to capture outputs) and the candidates'
        KV-capped twins (output_coverage's KV families run on them: harness/config/kv_twin.py)."""
        return [a for n, a in self.loaded.items() if n not in self.arm_set.arms]

    @property
    def all(self) -> list[Arm]:
        return [*self.run_arms, *self.variants]

    def owner(self, arm: Arm) -> Arm:
        """The candidate whose workloads the arm's own tests use (ArmSet.owner; for an eager variant or a KV-capped
        twin, the candidate it belongs to)."""
        if arm.name in self.arm_set.arms:
            return self.loaded[self.arm_set.owner(arm.name)]
        return next((c for c in self.candidates if arm.name in (c.eager_variant, twin_name(c.name))), self.candidate)


def load_run_arms(names: list[str], reference: str | None, overrides: list[str]) -> RunArms:
    """The named candidates and every arm they name, each validated; a missing or broken one names the referring
    field. `--set PATH=VALUE` applies to every candidate, `--set ARM:PATH=VALUE` to that arm of the run alone (a
    reference or eager variant too); a scope that is no arm of the run is refused. Candidates that share a reference
    must choose the same workloads (it is measured once)."""
    named = {n: load_arm(n, overrides_for(n, overrides, candidate=True)) for n in names}
    arm_set = expand_arm_set(names, {n: a.reference for n, a in named.items()}, reference)
    loaded = {n: named[n] if n in arm_set.candidates else load_arm(n, overrides_for(n, overrides, False))
              for n in names}
    for arm in [loaded[n] for n in arm_set.candidates]:
        for other in check_references(arm, ARMS_DIR, reference, overrides):
            loaded.setdefault(other.name, other)
    unknown = sorted({a for a, _ in map(override_scope, overrides) if a is not None} - set(loaded))
    if unknown:
        raise ConfigError(f"--set {', '.join(f'{a}:...' for a in unknown)}: not an arm of this run (its arms: "
                          f"{', '.join(loaded)}); `--set ARM:PATH=VALUE` changes one arm of the run, "
                          "`--set PATH=VALUE` every candidate")
    return RunArms(arm_set, loaded)


def check_shared_workloads(arms: RunArms, suites: list[str]) -> None:
    """Candidates that share a reference choose the same workloads for the suites of the run (spec_decode only where
    the candidate has a drafter: the others skip it); ConfigError naming the arms, fields and files."""
    choices = {a.name: {k: workload_for(a, k) for k in workload_keys(suites, a.speculative is not None)}
               for a in arms.candidates}
    where = {a.name: defining_file(a, "workloads") for a in arms.candidates}
    conflicts = workload_conflicts(arms.arm_set, choices, where)
    if conflicts:
        raise ConfigError("\n".join(conflicts))
