"""Workload fit: each workload a run uses on an arm fits its max_model_len, draws its prompts from the arm's
vocabulary, and finds its data files (GSM8K, RULER's tokenizer)."""

from __future__ import annotations

from harness.config.arms import Arm, defining_file
from harness.config.errors import ConfigError
from harness.config.kv_twin import KV_FAMILIES, derivation, kv_twin, own_sizing, pool_problems, twin_sizing
from harness.config.suites import workload_keys
from harness.config.workloads import (
    Gsm8kWorkload,
    OutputCoverageWorkload,
    PromptSetWorkload,
    RulerWorkload,
    SpecDecodeWorkload,
    chunk_budget,
    load_workload,
    workload_for,
    workload_kind,
)
from harness.measure.gsm8k import check_data
from harness.measure.prompts import token_space
from harness.plan.preflight import Verdict, check_workload_fits

# Workload verdicts that read files of this machine (the model's tokenizer, the GSM8K data): `plan` shows them with
# this machine's resources; whether a workload fits max_model_len is the arm's own and decides `plan` as `qualify`.
LOCAL_FILE_RULES = {"workload_vocabulary", "gsm8k_data", "ruler_tokenizer"}


def chosen_workload(candidate: Arm, key: str):
    """The workload the candidate's `workloads:` chose for a suite family; an unknown or invalid one names the arm's
    file and field that chose it."""
    try:
        return load_workload(workload_for(candidate, key), kind=workload_kind(key))
    except ConfigError as exc:
        if getattr(candidate.workloads, key, None) is None:  # the suite's default: no field of the arm chose it
            raise
        raise ConfigError(f"arm {candidate.name!r}: {defining_file(candidate, 'workloads')}: field workloads.{key}: "
                          f"{exc}") from None


def workload_verdicts(candidate: Arm, arm: Arm, suites: list[str]) -> list[Verdict]:
    """Per workload the run will use on this arm: it fits max_model_len, its prompts can be drawn from the arm's
    vocabulary, its data files are sound (GSM8K: raises ConfigError naming file and line)."""
    chosen = sorted(workload_keys(suites))
    verdicts = []
    for key in chosen:
        w = chosen_workload(candidate, key)
        if isinstance(w, Gsm8kWorkload | SpecDecodeWorkload):  # both read the local GSM8K files
            verdicts.append(Verdict("gsm8k_data", True, check_data()))
            continue
        if isinstance(w, RulerWorkload):
            verdicts += ruler_verdicts(candidate, arm, w)
            continue
        prompt, output = w.longest() if isinstance(w, PromptSetWorkload) else (w.prompt_tokens, w.output_tokens)
        verdicts.append(check_workload_fits(w.name, prompt, output, arm.name, arm.model.max_model_len,
                                            getattr(w, "prompt_basis", "token_ids")))
        if isinstance(w, OutputCoverageWorkload):
            verdicts += coverage_verdicts(candidate, arm, w)
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


def coverage_verdicts(candidate: Arm, arm: Arm, w: OutputCoverageWorkload) -> list[Verdict]:
    """output_coverage beyond its fit: the candidate's chunk budget known (the chunk cells are placed by it) and the
    KV pool its KV families run on."""
    out = []
    try:
        budget = chunk_budget(candidate, w)
        out.append(Verdict("coverage_chunk_budget", True, f"workload {w.name}: chunk cells around multiples of "
                           f"{budget.tokens} ({budget.source})"))
    except ConfigError as exc:
        out.append(Verdict("coverage_chunk_budget", False, str(exc)))
    return out + (kv_verdicts(candidate, w) if arm.name == candidate.name else [])


def kv_verdicts(candidate: Arm, w: OutputCoverageWorkload) -> list[Verdict]:
    """The KV pool kv_pressure and recycled_blocks run on (harness/config/kv_twin.py): the candidate's own cap where it
    serves them, else its KV-capped twin's, whose cap must hold max_model_len, admit the burst, be overflowed by it
    and be turned over by the fill; each failure names the arm, the workload and the field to change."""
    if w.pressure is None and w.recycled is None:
        return []
    where = f"arm {candidate.name!r}: workloads.output_coverage (configs/workloads/{w.name}.yaml)"
    try:
        twin = kv_twin(candidate, w)
    except ConfigError as exc:
        return [Verdict("coverage_kv_cap", False, str(exc))]
    if twin is None:
        own = own_sizing(candidate, w)
        return [Verdict("coverage_kv_cap", True, f"{where}: {KV_FAMILIES} on the arm itself, server.kv_cache_blocks "
                        + (derivation(own, w, candidate.model.max_model_len) if own
                           else f"{candidate.server.kv_cache_blocks} "
                                "(block size unknown: its counters prove the pressure)"))]
    s = twin_sizing(candidate, w)
    problems = pool_problems(s, w, candidate.model.max_model_len)
    if problems:
        return [Verdict("coverage_kv_cap", False, f"{where}: its KV-capped twin cannot serve {KV_FAMILIES}: "
                        + "; ".join(problems))]
    return [Verdict("coverage_kv_cap", True, f"{where}: {KV_FAMILIES} on its KV-capped twin {twin.name}, "
                    f"--num-gpu-blocks-override {derivation(s, w, candidate.model.max_model_len)}")]


def kv_twins(candidates: list[Arm], suites: list[str]) -> dict[str, Arm]:
    """The KV-capped twins of the candidates whose output_coverage runs its KV families on one (kv_twin.needs_twin),
    by name: admitted and launched like an eager variant. A twin that cannot be sized is none here: the candidate's
    coverage_kv_cap verdict refuses the run, saying why."""
    if "output_coverage" not in suites:
        return {}
    out = {}
    for candidate in candidates:
        try:
            twin = kv_twin(candidate, chosen_workload(candidate, "output_coverage"))
        except ConfigError:
            continue
        if twin is not None:
            out[twin.name] = twin
    return out
