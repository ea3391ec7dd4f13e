"""Admission: everything `plan` and `qualify` check before anything starts or is written.

Steps: parse_suites -> choose_run_dir -> load_run_arms (the candidate and every arm it names) -> admit (per arm:
preflight, workloads, this machine's resources, vLLM's own parser) -> check_baseline. Every failure is a ConfigError or
PreflightError (exit code 2); the failures of all arms come in one block, one line each, and nothing was started:
no server, no run directory.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm, check_references, defining_file, load_arm, override_scope, overrides_for
from harness.config.armset import ArmSet, expand_arm_set, workload_conflicts
from harness.config.errors import ConfigError, PreflightError
from harness.config.paths import ARMS_DIR, REPO_ROOT, REPORTS_DIR, run_id_now, server_python
from harness.config.workloads import (
    SUITE_WORKLOADS,
    WORKLOAD_KINDS,
    Gsm8kWorkload,
    RulerWorkload,
    SpecDecodeWorkload,
    load_workload,
    workload_for,
)
from harness.measure.gsm8k import check_data
from harness.measure.prompts import token_space
from harness.plan.env_policy import check_env_with_vllm
from harness.plan.nodes import Plan
from harness.plan.preflight import Verdict, check_workload_fits, not_checked, violations
from harness.plan.resources import check_parallel_gpus, check_resources, lease_pool
from harness.plan.spec_methods import check_method, read_methods
from harness.plan.vllm_args import check_with_vllm
from harness.records.results import locate_results, read_results
from harness.serve.launch import plan_for
from harness.serve.placing import preview, slurm_verdicts

SUITES_DIR = REPO_ROOT / "suites"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def strict_run(flag: bool = False) -> bool:
    """Nightly and CI runs are strict: a check that could not run fails instead of reading 'not checked'."""
    return flag or os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def all_suites() -> list[str]:
    return sorted(p.stem.removeprefix("test_") for p in SUITES_DIR.glob("test_*.py"))


# Suites a run without --suites leaves out: they run when named (make qualify SUITES=..., --suites ...,ruler).
# ruler: lm-eval's RULER tasks on the CPU pair add ~1.5 min to `make qualify` on 2 cores (two arms x 48 samples of
# 1k-4k tokens, and generating them), beyond the ~60 s a default suite may add there. capacity: a ramp to
# saturation needs an arm whose KV cache is capped to reach it (cpu-smoke-kvcap; GPU arms: --num-gpu-blocks-override).
NAMED_ONLY = ("ruler", "capacity")


def default_suites() -> list[str]:
    """The suites of a run without --suites: every suite in suites/ but the NAMED_ONLY ones."""
    return [s for s in all_suites() if s not in NAMED_ONLY]


def parse_suites(text: str | None) -> list[str]:
    """--suites a,b: every name a suite in suites/; None means the default suites (all but NAMED_ONLY). An empty
    name is an error, not the default."""
    known = all_suites()
    if text is None:
        return default_suites()
    chosen = [s.strip() for s in text.split(",")]
    if any(not s for s in chosen):
        raise ConfigError(f"--suites {text!r}: empty suite name; choose from {', '.join(known)} "
                          "(or leave --suites out to run them all)")
    unknown = [s for s in chosen if s not in known]
    if unknown:
        raise ConfigError(f"--suites {text!r}: unknown suite(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return list(dict.fromkeys(chosen))


def choose_run_dir(run_id: str | None, run_dir: str | None) -> Path:
    """--run-dir as given, or reports/<run-id>: a run id is one plain name, never a path out of reports/. An existing
    file, or a directory that already holds a run, is refused (records would mix)."""
    if run_dir:
        path = Path(run_dir)
        what = f"--run-dir {run_dir}"
    else:
        rid = run_id or run_id_now()
        if not RUN_ID.match(rid):
            raise ConfigError(f"--run-id {rid!r}: a run id is one name under {REPORTS_DIR} (letters, digits, '.', "
                              "'_', '-'; no '/' or '..'); use --run-dir to write elsewhere")
        path = REPORTS_DIR / rid
        what = f"--run-id {rid}"
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what}: {path} exists and is not a directory; name a new directory")
    if (path / "results.jsonl").exists() or (path / "run.json").exists():
        raise ConfigError(f"{what}: {path} already holds a run; choose a new run id or directory")
    return path


@dataclass
class RunArms:
    arm_set: ArmSet
    loaded: dict[str, Arm]  # every arm of the run (candidates with --set applied) and the candidates' eager variants

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
        """Eager variants the candidates name (graph_replay launches them to capture outputs)."""
        return [a for n, a in self.loaded.items() if n not in self.arm_set.arms]

    @property
    def all(self) -> list[Arm]:
        return [*self.run_arms, *self.variants]

    def owner(self, arm: Arm) -> Arm:
        """The candidate whose workloads the arm's own tests use (ArmSet.owner; for an eager variant, the candidate
        that names it)."""
        if arm.name in self.arm_set.arms:
            return self.loaded[self.arm_set.owner(arm.name)]
        return next((c for c in self.candidates if c.eager_variant == arm.name), self.candidate)


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
    def keys(arm: Arm) -> set[str]:
        chosen = {SUITE_WORKLOADS[s] for s in suites if s in SUITE_WORKLOADS}
        return chosen if arm.speculative is not None else chosen - {"spec_decode"}

    choices = {a.name: {k: workload_for(a, k) for k in keys(a)} for a in arms.candidates}
    where = {a.name: defining_file(a, "workloads") for a in arms.candidates}
    conflicts = workload_conflicts(arms.arm_set, choices, where)
    if conflicts:
        raise ConfigError("\n".join(conflicts))


def server_python_of(arm: Arm) -> tuple[str, str]:
    """The arm's server interpreter and where that choice came from (for the message)."""
    if arm.launcher.python:
        return arm.launcher.python, f"{defining_file(arm, 'launcher')}: field launcher.python"
    origin = "HARNESS_SERVER_PYTHON" if os.environ.get("HARNESS_SERVER_PYTHON") else "the default server interpreter"
    return server_python(), origin


def chosen_workload(candidate: Arm, key: str):
    """The workload the candidate's `workloads:` chose for a suite family; an unknown or invalid one names the arm's
    file and field that chose it."""
    try:
        return load_workload(workload_for(candidate, key), kind=WORKLOAD_KINDS[key])
    except ConfigError as exc:
        if getattr(candidate.workloads, key, None) is None:  # the suite's default: no field of the arm chose it
            raise
        raise ConfigError(f"arm {candidate.name!r}: {defining_file(candidate, 'workloads')}: field workloads.{key}: "
                          f"{exc}") from None


def workload_verdicts(candidate: Arm, arm: Arm, suites: list[str]) -> list[Verdict]:
    """Per workload the run will use on this arm: it fits max_model_len, its prompts can be drawn from the arm's
    vocabulary, its data files are sound (GSM8K: raises ConfigError naming file and line)."""
    chosen = sorted({SUITE_WORKLOADS[s] for s in suites if s in SUITE_WORKLOADS})
    verdicts = []
    for key in chosen:
        w = chosen_workload(candidate, key)
        if isinstance(w, Gsm8kWorkload | SpecDecodeWorkload):  # both read the local GSM8K files
            verdicts.append(Verdict("gsm8k_data", True, check_data()))
            continue
        if isinstance(w, RulerWorkload):
            verdicts += ruler_verdicts(candidate, arm, w)
            continue
        verdicts.append(check_workload_fits(w.name, w.prompt_tokens, w.output_tokens, arm.name,
                                            arm.model.max_model_len, getattr(w, "prompt_basis", "token_ids")))
        try:
            space = token_space(arm, w)
            verdicts.append(Verdict("workload_vocabulary", True, f"workload {w.name}: {space.vocab_size} tokens"))
        except ConfigError as exc:
            verdicts.append(Verdict("workload_vocabulary", False, str(exc)))
        except (OSError, ValueError) as exc:
            verdicts.append(Verdict("workload_vocabulary", False, f"workload {w.name}: cannot read the vocabulary of "
                                    f"arm {arm.name!r}'s model: {exc}"))
    return verdicts


def ruler_verdicts(candidate: Arm, arm: Arm, w: RulerWorkload) -> list[Verdict]:
    """RULER: its longest sample (answer budget included) and lm-eval's gen_prefix within the arm's max_model_len;
    the candidate's tokenizer, which sizes the samples both arms get, is readable here."""
    from harness.measure.ruler import tokenizer_dir

    fits = w.max_len <= arm.model.max_model_len
    out = [Verdict("workload_fits", fits, f"workload {w.name}: longest RULER length {max(w.max_seq_lengths)} + "
                   f"{w.max_len - max(w.max_seq_lengths)} tokens of gen_prefix = {w.max_len}; arm {arm.name} "
                   f"max_model_len {arm.model.max_model_len}" + ("" if fits else ": lower max_seq_lengths"))]
    try:
        where = tokenizer_dir(candidate, w)
        out.append(Verdict("ruler_tokenizer", True, f"workload {w.name}: samples sized with {where}"))
    except ConfigError as exc:
        out.append(Verdict("ruler_tokenizer", False, str(exc)))
    return out


# Workload verdicts that read files of this machine (the model's tokenizer, the GSM8K data): `plan` shows them with
# this machine's resources; whether a workload fits max_model_len is the arm's own and decides `plan` as `qualify`.
LOCAL_FILE_RULES = {"workload_vocabulary", "gsm8k_data", "ruler_tokenizer"}


def arm_verdicts(arm: Arm, candidate: Arm, suites: list[str] | None, resources: bool = True) -> tuple[Plan,
                                                                                                   list[Verdict]]:
    """Every verdict of one arm but vLLM's parser: preflight, workloads, this machine."""
    plan = plan_for(arm, placement=preview(arm))
    verdicts = [*plan.verdicts, *(workload_verdicts(candidate, arm, suites) if suites is not None else []),
                *(machine_verdicts(arm) if resources else [])]
    return plan, verdicts


def machine_verdicts(arm: Arm) -> list[Verdict]:
    """This machine: GPUs, model, server environment, port; and the SLURM cluster (an unknown node name, no
    allocation and nothing to ask one with) or Ray cluster the arm runs on."""
    python, origin = server_python_of(arm)
    return [*check_resources(arm, python, origin), *slurm_verdicts(arm)]


def parser_verdict(arm: Arm, plan: Plan, vllm_check: bool, strict: bool, earlier_failures: bool) -> Verdict:
    """vLLM's own parser on the arm's argv -- only when every other check of the run holds: importing vLLM takes
    seconds, and a refused run needs no second opinion."""
    needs_gpu_vllm = strict and arm.device == "gpu"
    if not vllm_check:
        return not_checked("vllm_parses_argv", "--no-vllm-check", needs_gpu_vllm)
    if earlier_failures:
        return not_checked("vllm_parses_argv", "the failures above come first")
    return check_with_vllm(plan.nodes, server_python_of(arm)[0], strict=needs_gpu_vllm)


def env_verdict(arm: Arm, plan: Plan) -> Verdict:
    """Every VLLM_* variable the arm sets is one the installed vLLM reads (its vllm.envs listing)."""
    return check_env_with_vllm(plan.nodes, server_python_of(arm)[0])


def method_verdicts(arm: Arm, strict: bool) -> list[Verdict]:
    """The speculative method checked against the installed vLLM's accepted methods (none without `speculative`)."""
    if arm.speculative is None:
        return []
    return [check_method(arm, read_methods(server_python_of(arm)[0]), strict)]


def refusal(failed: dict[str, list[Verdict]]) -> PreflightError:
    lines = []
    for name, verdicts in failed.items():
        lines.append(f"arm {name!r} cannot run here:")
        lines += [f"  {v.rule}: {v.detail}" for v in verdicts]
    return PreflightError("\n".join(lines) + "\nnothing was started")


def admit(arms: RunArms, suites: list[str], vllm_check: bool, strict: bool) -> dict[str, list[Verdict]]:
    """Every arm of the run checked; a PreflightError listing every failure of every arm, or the verdicts."""
    checked = {arm.name: (arm, *arm_verdicts(arm, arms.owner(arm), suites)) for arm in arms.all}
    failed = {name: violations(v) for name, (_, _, v) in checked.items() if violations(v)}
    if failed:
        raise refusal(failed)
    out = {}
    for name, (arm, plan, verdicts) in checked.items():
        # The env check imports only vllm.envs and runs even with --no-vllm-check: an unread DCP variable would
        # otherwise silently do nothing.
        out[name] = [*verdicts, env_verdict(arm, plan), *method_verdicts(arm, strict),
                     parser_verdict(arm, plan, vllm_check, strict, False)]
        if violations(out[name]):
            failed[name] = violations(out[name])
    if failed:
        raise refusal(failed)
    return out


def check_parallel(arms: RunArms) -> None:
    """--parallel starts every arm's server at once, each on GPUs leased for it: together they must fit the pool."""
    try:
        pool, origin = lease_pool()
    except ValueError as exc:
        raise ConfigError(f"HARNESS_GPUS: {exc}") from None
    verdict = check_parallel_gpus(arms.run_arms, pool, origin)
    if not verdict.ok:
        raise PreflightError(f"{verdict.rule}: {verdict.detail}\nnothing was started")


def check_baseline(arg: str) -> Path:
    """--baseline resolves to a results file with at least one readable record: checked now, not after the run."""
    path = locate_results(arg)
    records, problems = read_results(path)
    if not records:
        why = problems[0] if problems else f"{path} is empty"
        raise ConfigError(f"--baseline {arg}: no readable record in {path} ({why}); pass an earlier run's "
                          "directory or its results.jsonl")
    return path


def resume_run_dir(arg: str, run_id: str | None, run_dir: str | None) -> Path:
    """--resume <run id or dir>: an earlier run that holds run.json; never together with --run-id/--run-dir."""
    if run_id or run_dir:
        raise ConfigError(f"--resume {arg}: resumes that run in its own directory; leave out --run-id/--run-dir")
    path = Path(arg)
    if "/" not in arg and not path.is_dir():  # a plain name is a run id under reports/
        if not RUN_ID.match(arg):
            raise ConfigError(f"--resume {arg!r}: a run id is one name under {REPORTS_DIR}, or pass a run directory")
        path = REPORTS_DIR / arg
    if not (path / "run.json").is_file():
        raise ConfigError(f"--resume {arg}: no run there ({path / 'run.json'} does not exist); name an earlier run "
                          f"id under {REPORTS_DIR} or its directory")
    return path


def check_resume(run_dir: Path, info: dict, arms: dict[str, dict], suites: list[str] | None) -> list[str]:
    """The resumed run's arms (resolved fields, redacted) and suites must be the ones run.json recorded: records of
    two configurations must not mix. Returns the suites to run (run.json's when --suites is left out)."""
    recorded = info.get("arms")
    if not isinstance(recorded, dict):
        raise ConfigError(f"--resume: {run_dir / 'run.json'} names no arms (field 'arms'); it cannot be resumed")
    if list(recorded) != list(arms):
        raise ConfigError(f"--resume: {run_dir / 'run.json'} field 'arms' names {', '.join(recorded)}; this command "
                          f"names {', '.join(arms)}; pass the run's own --arm/--reference")
    changed = [name for name in arms if recorded[name] != arms[name]]
    if changed:
        raise ConfigError(f"--resume: arm(s) {', '.join(changed)} differ from {run_dir / 'run.json'} field 'arms' "
                          "(an edited YAML or another --set); resume with the run's own configuration")
    before = info.get("suites")
    if not isinstance(before, list):
        raise ConfigError(f"--resume: {run_dir / 'run.json'} has no field 'suites'; it cannot be resumed")
    if suites is not None and sorted(suites) != sorted(before):
        raise ConfigError(f"--resume: --suites {','.join(suites)} differs from the run's suites "
                          f"({','.join(before)} in {run_dir / 'run.json'}); leave --suites out")
    return before
