"""run.json as one typed, versioned model, and the one loader that reads every shape ever written and refuses a
version it does not know. Its keys are the ones run.json always had (scripts read them). Arms, workloads, gates and
device stay plain JSON: their own models move on, and a run recorded under an older one must still load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.records.migrations import FormatError, StoredFormat, upgrade

SCHEMA_VERSION = 1


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunPair(Strict):
    """A candidate with its reference (None: a candidate alone), its gate thresholds as resolved at the start (None:
    not recorded, the report then reads the candidate's current gates.yaml section) and its workloads."""
    candidate: str
    reference: str | None = None
    gates: dict[str, Any] | None = None
    workloads: dict[str, Any] | None = None


class Resume(Strict):
    started: str
    argv: list[str]
    exit_code_before: int | None = None


class CalibrationRepeat(Strict):
    id: str  # the calibration's name: its repeats' run directories are <id>-r<k>
    repeat: int
    of: int
    # the execution this repeat measured (config/variants.py); None: recorded before variants (as configured)
    variant: str | None = None


class ArmBuild(Strict):
    """The vLLM build an arm's server imports (harness/plan/build.py): its version and a hash of the package's files
    (None: no vllm package found for the arm's interpreter), and where that package is."""
    vllm_version: str | None = None
    build_hash: str | None = None
    where: str | None = None
    package_hash: str | None = None  # the vllm package's files alone (None: recorded before it was)


class BaselineBuild(Strict):
    """The signed-off run a build-vs-build run is judged against (harness/admission/baseline_build.py): a passed run of
    the same arm whose outputs are stored, and the build it ran."""
    run_id: str
    run_dir: str
    arm: str
    build_hash: str | None = None
    vllm_version: str | None = None


class RunManifest(Strict):
    schema_version: int = SCHEMA_VERSION
    run_id: str | None = None
    harness_version: str | None = None
    git_commit: str | None = None
    # The code that measures and judges (runinfo.harness_hash): calibration repeats combine when it is one.
    harness_hash: str | None = None
    host: str | None = None
    started: str | None = None
    argv: list[str] | None = None  # redacted
    suites: list[str] | None = None
    workloads: dict[str, Any] | None = None  # the first candidate's; each pair has its own
    arms: dict[str, dict[str, Any]] | None = None  # name -> resolved fields, redacted; candidates first
    per_arm_suites: list[str] | None = None  # None (older runs): every suite ran for every arm
    strict: bool | None = None
    gates: dict[str, Any] | None = None  # the first candidate's
    pairs: list[RunPair] = []
    resumed: list[Resume] | None = None
    finished: str | None = None  # None: the run was interrupted or is still running
    exit_code: int | None = None  # the run's verdict
    device: dict[str, Any] | None = None
    pytest_exit_code: int | None = None
    baseline: str | None = None
    # The order the reference checks send their prompts in (harness/refcheck/prompts/order.py): 0 or None the canonical
    # order; another seed another batch composition and arrival order, reproducible from this number.
    order_seed: int | None = None
    # The seed of the long_context sweep's jittered lengths (refcheck/prompts/long_context.py): each run draws its
    # own unless `--length-seed` names one; this number reproduces the lengths.
    length_seed: int | None = None
    # set by `harness calibrate` alone: which repeat of how many; such runs stay out of the history's series
    calibration: CalibrationRepeat | None = None
    # arm -> the vLLM build its server imports, measured at the start: which build ran, and whether it is the one
    # a calibration measured.
    builds: dict[str, ArmBuild] | None = None
    # arm -> its generated tiny model's weights hash, retrieval accuracy and median top-2 gap (runinfo.model_quality)
    models: dict[str, dict[str, Any]] | None = None
    # `qualify --baseline-build`: the last signed-off build of the candidate, whose stored outputs it is compared with
    baseline_build: BaselineBuild | None = None

    def workloads_of(self, pair: RunPair) -> dict[str, Any] | None:
        """A pair's workloads; the run's where it has none of its own (runs written before pairs recorded theirs)."""
        return pair.workloads or self.workloads

    def to_json(self) -> str:
        """The keys that were set, in the order above: a field never recorded stays absent, not null."""
        return json.dumps(self.model_dump(mode="json", exclude_unset=True), indent=2) + "\n"


class ManifestError(ValueError):
    """A document that is JSON but no run manifest this harness reads (a field, an unknown version)."""


class ManifestProblem(Exception):
    """Why <run_dir>/run.json gives no manifest; the message is the sentence a report lists. A subclass says which
    kind, so callers decide by type, not by matching the text."""


class ManifestMissing(ManifestProblem):
    pass


class ManifestUnreadable(ManifestProblem):
    """Not UTF-8, not JSON or not a JSON object."""


class NotAManifest(ManifestProblem):
    """JSON this harness cannot read as a run manifest: another program's file, or a newer harness's."""


def unversioned_to_1(raw: dict, run_id: str) -> dict:
    """Unversioned run.json, with or without `pairs` (the oldest: the first arm against the second), gets its pairs
    and run id."""
    out = {"run_id": run_id, **raw}
    if isinstance(raw.get("pairs"), list):
        out["pairs"] = [p for p in raw["pairs"] if isinstance(p, dict) and p.get("candidate")]
    elif raw.get("arms"):
        arms = list(raw["arms"])
        out["pairs"] = [{"candidate": arms[0], "reference": arms[1] if len(arms) > 1 else None,
                         "gates": raw.get("gates"), "workloads": raw.get("workloads")}]
    return out


RUN_JSON = StoredFormat("run.json", "schema_version", SCHEMA_VERSION, {0: unversioned_to_1},
                        remedy="render it with the harness that wrote it (its harness_version, git_commit)")


def migrate(raw: dict, run_id: str) -> dict:
    """Any run.json ever written -> the current schema's fields (pure), through records.migrations' steps."""
    try:
        return upgrade(raw, RUN_JSON, run_id=run_id)
    except FormatError as exc:
        raise ManifestError(str(exc)) from None


def parse_manifest(raw: dict, run_id: str = "") -> RunManifest:
    """A run.json document (any version this harness knows) as the current model; ManifestError says why not."""
    try:
        return RunManifest.model_validate(migrate(raw, run_id))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ManifestError(f"field {where}: {first['msg']}") from None


def read_manifest(run_dir: Path) -> RunManifest:
    """<run_dir>/run.json, migrated; a ManifestProblem of the kind that says why not."""
    path = run_dir / "run.json"
    if not path.is_file():
        raise ManifestMissing(f"{path}: missing: no provenance (harness version, host, arms) for this run")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ManifestUnreadable(f"{path}: not UTF-8 text (byte {exc.start}); provenance unknown") from None
    except json.JSONDecodeError as exc:
        raise ManifestUnreadable(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); provenance unknown") from None
    if not isinstance(raw, dict):
        raise ManifestUnreadable(f"{path}: not a JSON object; provenance unknown")
    try:
        return parse_manifest(raw, run_dir.name)
    except ManifestError as exc:
        raise NotAManifest(f"{path}: not a run manifest ({exc}); provenance unknown") from None


SIGNALS = {130: "SIGINT", 143: "SIGTERM"}


def interruption(manifest: RunManifest | None) -> list[str]:
    """Why a run did not run to its end, from its run.json (no end time, or an exit on a signal); [] when it did."""
    code = manifest.exit_code if manifest else None
    if manifest is not None and manifest.finished is None:
        return ["run.json has no end time: the run was interrupted (or is still running); "
                "everything recorded before that is shown"]
    if isinstance(code, int) and code >= 128:
        return [f"the run was interrupted (exit code {code}, {SIGNALS.get(code, f'signal {code - 128}')}); "
                "suites after that point did not run"]
    return []


def load_manifest(run_dir: Path) -> tuple[RunManifest | None, list[str]]:
    """<run_dir>/run.json, migrated; None and why when it is missing, not JSON or not a run manifest."""
    try:
        return read_manifest(run_dir), []
    except ManifestProblem as exc:
        return None, [str(exc)]


def write_manifest(run_dir: Path, manifest: RunManifest) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(manifest.to_json())
