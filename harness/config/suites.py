"""The suite catalogue: every qualification suite in suites/ once; every other list of suites derives from SUITES.

A gated suite names its gate's kind (GATE_KINDS, each judged by one function in harness/judge/catalogue_gate.py); a
reference-check suite names its workload family and `refcheck` module. What a new suite needs: docs/suites.md
("Adding a suite")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.config.errors import ConfigError
from harness.config.paths import REPO_ROOT

SUITES_DIR = REPO_ROOT / "suites"


@dataclass(frozen=True)
class MetricGate:
    """A gate from the catalogue alone: the median of the candidate's per-request samples of `metric` (the suite's
    MetricRecords) against the reference's, within `tolerance` (relative) in the worse direction
    (harness/judge/metric_gate.py). gates.yaml `metric_gates.<gate>` overrides the tolerance per arm."""

    metric: str  # MetricRecord.metric, e.g. "ttft_s"
    better: Literal["lower", "higher"]
    tolerance: float  # the default: candidate median <= reference median x (1 + tolerance), for "lower"
    derivation: str  # where the default comes from: the measured clean spread it sits above
    # The device that spread was measured on: an arm on another device is not judged by it (its gate FAILs "not
    # measured for this arm" until gates.yaml metric_gates.<gate>.tolerance sets one measured there).
    measured_on: Literal["cpu", "gpu"] = "cpu"


@dataclass(frozen=True)
class AccuracyGate:
    """A gate from the catalogue alone: paired exact McNemar per item, pooled and, `by_length`, per prompt length
    (harness/judge/accuracy_gate.py)."""

    limits: str  # the gates.yaml section (a Gates field) of its limits: mcnemar_alpha, max_request_errors, ...
    per_item: str  # the record's field of item -> correct (keyed by the limits' `filter` first, where they name one)
    task: str  # how its sentences name the task: "GSM8K"
    item: str  # and one item: "question"
    items: str  # and several in its power sentence: "questions" ("6 of 40 paired questions lost")
    by_length: bool = False  # items keyed "<task>@<length>#<doc id>" are also tested per length
    # Both arms were sent one generated data set (the record's data_sha): another set, or an item one arm alone
    # answered, is no data.
    shared_data: bool = False


@dataclass(frozen=True)
class LevelTimingGate:
    """TPOT p50 at each load level within a tolerance of the reference's, on valid outputs only, and outputs checked
    as far as the run timed (harness/judge/gates.py long_prefix_gates)."""

    limits: str  # the gates.yaml section of its limits: tpot_p50_tolerance, max_failed_requests, enforce_timing


@dataclass(frozen=True)
class SloCapacityGate:
    """Capacity at an SLO: the highest level of the candidate's ramp meeting the SLO (TPOT and TTFT p99, no failed
    request, outputs equal to the reference's) against the reference's, at least a required factor
    (harness/judge/capacity.py)."""

    limits: str  # the gates.yaml section of its limits: the SLO, min_ratio, kv_ratio_share, knee_gain


@dataclass(frozen=True)
class RecordedVerdictGate:
    """The suite judges each comparison as it runs and records the whole verdict; the gate reads that record back,
    complete or "no data" (harness/judge/long_context.py)."""


@dataclass(frozen=True)
class SpeculativeGates:
    """Speculative decoding's gates: acceptance, its per-position curve, collapse, output equality, degeneration,
    speed-up and the draft's KV policy, none where the suite skipped (harness/judge/spec_decode_gates.py)."""

    limits: str  # the gates.yaml section of its limits


GateKind = MetricGate | AccuracyGate | LevelTimingGate | SloCapacityGate | RecordedVerdictGate | SpeculativeGates
GATE_KINDS = (MetricGate, AccuracyGate, LevelTimingGate, SloCapacityGate, RecordedVerdictGate, SpeculativeGates)


@dataclass(frozen=True)
class Suite:
    name: str  # suites/test_<name>.py
    workload: str | None  # the key under an arm's `workloads:` it runs (harness/config/workloads.py); None: none
    per_arm: bool  # its tests take the plugin's `served_arm`: once per arm of the run; else once per candidate
    gate: str | None = None  # its candidate-vs-reference gate as the Gates table names it; None: not gated
    records: tuple[str, ...] = ()  # the record kinds (records/schema.py `kind`) that gate reads
    default: bool = True  # runs without --suites; False: only when named (cost, or an arm that can reach it)
    needs_drafter: bool = False  # skip rule: runs only for candidates with a `speculative:` section
    calibrated: bool = False  # its output checks are judged by a calibrated floor (`harness calibrate` runs it)
    gate_kind: GateKind | None = None  # its gate's shape (one of GATE_KINDS), judged by that kind's function
    default_workload: str | None = None  # a family of its own (MetricGate, refcheck): run when an arm chooses none
    # The reference checks (ReferenceCheckRecord.check) its test writes, each judged by a drift limit: what
    # gates.yaml drift_limits may name and what `harness calibrate` calibrates, each on its own comparisons.
    checks: tuple[str, ...] = ()
    # A reference-check suite: the module under harness/refcheck/prompt_sets/ whose PROMPT_SETS its tests' reference
    # outputs come from (its family's workload model: harness/config/workloads.py PromptSetWorkload)
    refcheck: str | None = None

    @property
    def path(self):
        return SUITES_DIR / f"test_{self.name}.py"

    @property
    def metric_gate(self) -> MetricGate | None:
        """Its gate kind where that is a MetricGate (its records are the `metric` kind)."""
        return self.gate_kind if isinstance(self.gate_kind, MetricGate) else None

    @property
    def accuracy_gate(self) -> AccuracyGate | None:
        """Its gate kind where that is an AccuracyGate (its records are its own kind, records[0])."""
        return self.gate_kind if isinstance(self.gate_kind, AccuracyGate) else None

    def runs_for(self, speculative: bool) -> bool:
        """Whether a candidate with (or without) a speculative section runs it (its static skip rule)."""
        return speculative or not self.needs_drafter


# Gated suites first, in the order the Gates table lists their gates.
SUITES = (
    Suite("long_prefix", "long_prefix", per_arm=True, gate="long_prefix_tpot_p50", records=("long_prefix",),
          calibrated=True, checks=("long_prefix_outputs",), gate_kind=LevelTimingGate("long_prefix")),
    Suite("gsm8k", "gsm8k", per_arm=True, gate="gsm8k_paired_accuracy", records=("gsm8k",),
          gate_kind=AccuracyGate("gsm8k", "per_question", "GSM8K", "question", "questions")),
    # ruler: named only, its cost on `make qualify` is above what a default suite may add (docs/suites.md)
    Suite("ruler", "ruler", per_arm=True, gate="ruler_paired_accuracy", records=("ruler",), default=False,
          gate_kind=AccuracyGate("ruler", "per_sample", "RULER", "sample", "RULER samples", by_length=True,
                                 shared_data=True)),
    # spec_decode: calibrated, as one arm's hand-set limit says nothing of another drafter (docs/suites.md)
    Suite("spec_decode", "spec_decode", per_arm=True, gate="spec_decode_acceptance_length", records=("spec_decode",),
          needs_drafter=True, calibrated=True, checks=("spec_decode",), gate_kind=SpeculativeGates("spec_decode")),
    # long_context: the bursts are a check of their own, as batch composition moves drift as single requests never do
    Suite("long_context", "long_context", per_arm=False, gate="long_context_outputs", records=("long_context",),
          calibrated=True, checks=("long_context", "long_context_bursts"), gate_kind=RecordedVerdictGate(),
          default_workload="long_context_gpu", refcheck="long_context_set"),
    # capacity: a ramp to saturation needs an arm whose KV cache is capped to reach it (cpu-smoke-kvcap; GPU arms:
    # --num-gpu-blocks-override).
    Suite("capacity", "capacity", per_arm=True, gate="capacity_at_slo", records=("capacity",), default=False,
          checks=("capacity_outputs",), gate_kind=SloCapacityGate("capacity")),
    # ttft: cold short-prompt medians, named only; its tolerance is measured on the CPU pair alone
    # (docs/evidence/cpu-ttft-2026-12-05.md), a GPU arm needs its own
    Suite("ttft", "ttft", per_arm=True, gate="ttft_p50", records=("metric",), default=False,
          gate_kind=MetricGate("ttft_s", "lower", 1.2, "3x the largest |log ratio| of 8 clean CPU-pair runs (0.26)",
                               measured_on="cpu"),
          default_workload="ttft_short"),
    # output_coverage: one reference check per family, each with its own limits (preemption and mixed chunks move
    # drift as the bursts do)
    Suite("output_coverage", "output_coverage", per_arm=False, calibrated=True,
          checks=("long_generation", "short_prompts", "chunk_boundaries", "kv_pressure", "recycled_blocks",
                  "multi_turn"), default_workload="output_coverage_gpu", refcheck="coverage_set"),
    # concurrent_prefills: prefills of very different lengths (and partial hits) in flight together, each against the
    # reference's output alone (issue 57 item 4). Named only until its cost on `make qualify` is measured.
    Suite("concurrent_prefills", "concurrent_prefills", per_arm=False, calibrated=True, checks=("concurrent_prefills",),
          default=False, default_workload="concurrent_prefills_gpu", refcheck="concurrent_prefills"),
    Suite("kv_capacity", None, per_arm=True),
    Suite("prefix_reuse", "reference_checks", per_arm=False, calibrated=True, checks=("prefix_reuse",),
          default_workload="reference_checks_gpu", refcheck="check_set"),
    Suite("graph_replay", "reference_checks", per_arm=False, calibrated=True,
          checks=("graph_replay", "graph_replay_eager"), default_workload="reference_checks_gpu", refcheck="check_set"),
    Suite("teacher_forcing", "reference_checks", per_arm=False, calibrated=True, checks=("teacher_forcing",),
          default_workload="reference_checks_gpu", refcheck="check_set"),
    Suite("dcp_ops", None, per_arm=False),
    # build vs build: the candidate's own outputs stored, and compared with its last signed-off build's
    # (`qualify --keep-outputs`, `--baseline-build`; judged with prefix_reuse's calibrated limits)
    Suite("build_outputs", "reference_checks", per_arm=False, default=False),
)
BY_NAME = {s.name: s for s in SUITES}


def limits_of(suite: Suite, gates):
    """The gates.yaml section (a thresholds.Gates field) its gate kind names as its limits."""
    return getattr(gates, suite.gate_kind.limits)


def all_suites() -> list[str]:
    return sorted(BY_NAME)


def default_suites() -> list[str]:
    """The suites of a run without --suites: every suite but those that run only when named."""
    return [s for s in all_suites() if BY_NAME[s].default]


def named_only() -> list[str]:
    return [s for s in all_suites() if not BY_NAME[s].default]


def calibrated_suites(suites: list[str] | None = None) -> list[str]:
    """Those of `suites` (default: every default suite) whose checks a calibration measures."""
    return [s for s in (suites if suites is not None else default_suites()) if s in BY_NAME and BY_NAME[s].calibrated]


def per_arm_suites(suites: list[str]) -> list[str]:
    """Those of `suites` whose tests run once per arm; the rest run for the candidate."""
    return [s for s in suites if s in BY_NAME and BY_NAME[s].per_arm]


def gated_suites() -> list[Suite]:
    """The suites with a candidate-vs-reference gate, in the Gates table's order."""
    return [s for s in SUITES if s.gate]


def drift_checks() -> tuple[str, ...]:
    """Every reference check a suite writes, in catalogue order (capacity's per-level checks capacity_outputs_c<N>
    go by "capacity_outputs")."""
    return tuple(c for s in SUITES for c in s.checks)


def metric_families() -> dict[str, str]:
    """The timing suites' workload families (family -> its default workload), each a MetricWorkload."""
    return {s.workload: s.default_workload for s in SUITES if s.workload and s.default_workload and s.metric_gate}


def prompt_set_families() -> dict[str, str]:
    """The reference-check suites' workload families (family -> its default workload), in catalogue order."""
    return {s.workload: s.default_workload for s in SUITES if s.workload and s.default_workload and s.refcheck}


def refcheck_modules() -> tuple[str, ...]:
    """The modules under harness/refcheck/prompt_sets/ whose PROMPT_SETS the reference-check suites name, once each."""
    return tuple(dict.fromkeys(s.refcheck for s in SUITES if s.refcheck))


def metric_gates() -> dict[str, MetricGate]:
    """gate name -> the MetricGate of the suite that names it."""
    return {s.gate: s.metric_gate for s in SUITES if s.gate and s.metric_gate}


def workload_keys(suites: list[str], speculative: bool = True) -> set[str]:
    """The workloads (keys under `workloads:`) a run of these suites uses on a candidate, its skip rules applied."""
    return {BY_NAME[s].workload for s in suites if s in BY_NAME and BY_NAME[s].workload
            and BY_NAME[s].runs_for(speculative)}


def parse_suites(text: str | None) -> list[str]:
    """--suites a,b: every name a catalogued suite; None means the default suites. An empty name is an error, not
    the default."""
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
