"""The prompt-set registry: every prompt set whose reference outputs the store keeps, found from the suite catalogue
(a reference-check Suite names `refcheck`, the module here whose PROMPT_SETS hold its sets). The reference capture,
the `<set>_outputs` fixtures and UnderTest read a set here by name: a new reference-check family adds no code to the
pytest plugin, admission or the workload table."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Protocol

from pydantic import BaseModel

from harness.config.arms import Arm
from harness.config.errors import ConfigError
from harness.config.suites import refcheck_modules
from harness.config.workloads import workload_kind
from harness.measure.generation import Generation, Sampling
from harness.measure.prompts import TokenSpace, token_space
from harness.records.started_run import StartedRun
from harness.refcheck.prompts.check_prompts import CheckPrompt
from harness.refcheck.send.batches import capture
from harness.serve.launch import LiveServer


class Prompts(Protocol):
    """What the reference store keeps of a prompt set: every prompt by a stable id, and a hash of them (its key)."""

    def all(self) -> list[CheckPrompt]: ...

    def fingerprint(self) -> str: ...


def capture_alone(live: LiveServer, prompts: Prompts, sampling: Sampling) -> dict[str, Generation]:
    """The reference's outputs: each prompt alone under its own cache salt (batches.capture)."""
    return capture(live, prompts.all(), sampling)


@dataclass(frozen=True)
class PromptSet:
    name: str  # the store's and the refresh marker's name: "reference_checks", "long_context_sweep"
    family: str  # the workload family (key under an arm's `workloads:`) its prompts are built from
    fixture: str  # the suite fixture that hands a test the reference arm's outputs for it
    # (run, candidate) -> the candidate's prompts and sampling, as the run started (both arms get the same)
    build: Callable[[StartedRun, str], tuple[Prompts, Sampling]]
    capture: Callable[[LiveServer, Prompts, Sampling], dict[str, Generation]] = capture_alone

    @property
    def model(self) -> type[BaseModel]:
        """Its workload model (harness/config/workloads.py PromptSetWorkload)."""
        return workload_kind(self.family)


@cache
def prompt_sets() -> dict[str, PromptSet]:
    """Every registered prompt set by name, from the catalogue's refcheck modules in catalogue order."""
    out: dict[str, PromptSet] = {}
    for module in refcheck_modules():
        for ps in import_module(f"harness.refcheck.prompt_sets.{module}").PROMPT_SETS:
            if ps.name in out or ps.fixture in {o.fixture for o in out.values()}:
                raise ConfigError(f"harness/refcheck/prompt_sets/{module}.py registers prompt set {ps.name!r} (fixture "
                                  f"{ps.fixture!r}), a name or fixture another refcheck module registers too")
            out[ps.name] = ps
    return out


def prompt_set(name: str) -> PromptSet:
    sets = prompt_sets()
    if name not in sets:
        raise ConfigError(f"no prompt set {name!r}; registered: {', '.join(sets)}")
    return sets[name]


def candidate_workload(run: StartedRun, candidate: str, family: str) -> tuple[BaseModel, Arm, TokenSpace]:
    """A builder's inputs: the candidate's `family` workload as the run started with it, the arm, its token space."""
    arm = run.arm(candidate)
    w = run.workload(family, candidate)
    return w, arm, token_space(arm, w)
