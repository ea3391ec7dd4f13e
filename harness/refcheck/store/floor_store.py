"""Known-good drift floors, kept beside the reference store: a passing run's comparisons for one (candidate config,
reference outputs' noise key), one file per reference check, against which later runs' drift is judged with a
paired test (harness/judge/drift_floor.py). A run never writes its own floor: `harness accept-floor RUN` marks a
run known-good, so a faulty build cannot become its own floor.

`harness calibrate` writes the same files from K repeats (the per-position mean as the floor) plus
<check>.calibration.json: the limits derived from the repeats' clean spread, how, and the false-positive rate measured
over them (harness/judge/calibration.py); a calibrated check is judged by those limits instead of gates.yaml's.

Layout: <reference dir>/floors/<candidate>-<key>/<check>.jsonl + <check>.source.json; the key hashes what sets the
comparison's noise -- the candidate's config (dtype, parallelism, server flags) and the reference outputs' noise key
(model, prompts, sampling, the reference's config) -- and neither arm's vLLM version: a new build, with the reference
recaptured on it, is judged by the last trusted calibration instead of being calibrated on itself. A calibration
records the build it measured (`build`); <check>.confirmed.json records the run of another build that confirmed a
calibration carrying labels ("first calibration", "trusted by hand", or inherited ones: written by qualify's end stage,
harness/calibrate/trust.py).

A calibration is sealed: it records the content hashes of its repeats and its floor, and its own (`sha256`); one whose
file or floor no longer hashes to what was recorded reads as CalibrationUnreadable ("edited"), never as limits.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.config.arms import Arm
from harness.records.jsonl import read_jsonl
from harness.records.migrations import FormatError, StoredFormat, upgrade
from harness.records.schema import RequestComparison, comparison_model
from harness.refcheck.store.reference_store import arm_config_sha


def floor_key(candidate: Arm, noise_key: str) -> str:
    """The calibration's (and an accepted floor's) key: the candidate's config and the reference outputs' noise key
    (refcheck.store.ReferenceKey.noise_key); no vLLM version."""
    blob = json.dumps({"candidate_config_sha": arm_config_sha(candidate), "reference_noise_key": noise_key},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def floor_dir(directory: Path, candidate: str, key: str) -> Path:
    return directory / "floors" / f"{candidate}-{key}"


@dataclass(frozen=True)
class Floor:
    comparisons: list[RequestComparison]
    source: dict  # run id, reference, accepted when

    @property
    def name(self) -> str:
        if self.source.get("calibration"):
            return (f"the calibration {self.source['calibration']} (mean of {self.source.get('repeats', '?')} "
                    "clean repeats; same candidate config and reference)")
        return f"the accepted run {self.source.get('run', '?')} (same candidate config and reference)"


@dataclass(frozen=True)
class Calibration:
    """A check's calibrated limits (<check>.calibration.json), with what they were derived from."""

    check: str
    drift_limit: float
    tie_gap: float
    repeats: int
    margin: float
    derivation: str
    false_positives: str  # the leave-one-out sentence
    calibrated: str  # when (ISO date-time)
    calibration: str  # the calibration's id (its repeats' run directories are <id>-r<k>)
    spread: dict  # harness.judge.calibration.Spread's fields
    # the smallest planted fault measured to fail the check under this calibration, and the largest that passed
    # (written by a power measurement, e.g. benchmarks/calibrated_power.py; None: not measured)
    power: str | None = None
    # Provenance (format 2): the build the repeats measured ({"vllm_version", "build_hash", "where"}: harness/plan/
    # build.py), the arm, the model's hashes, the reference outputs' full key, the candidate config's sha.
    build: dict | None = None
    arm: str | None = None
    model: dict | None = None
    reference_key: str | None = None
    arm_config_sha: str | None = None
    # The chain of trust: what judged the repeats ("the calibration ID" or gates.yaml for a first one), the
    # calibration this one replaced (None: the arm's first for this key), and the reason given with --trust where
    # its repeats failed against the current one (None: they passed).
    judged_against: str | None = None
    supersedes: str | None = None
    trusted: str | None = None
    # The labels of the calibration it replaced that no confirmation had cleared when it was derived ("first
    # calibration", "trusted by hand" with its reason, each with the id it came from): a calibration judged by an
    # unconfirmed one is no better vouched for, so it carries them until a run confirms it (open_labels).
    inherited: list | None = None
    # Integrity: the content hashes of the repeats it was derived from ({"run", "results_sha256", "run_json_sha256"}),
    # of its floor file, and of this document (`sha256`, over the canonical JSON without that field: seal_of).
    # None: stored before calibrations were sealed.
    repeat_hashes: list | None = None
    floor_sha256: str | None = None
    sha256: str | None = None

    @property
    def first(self) -> bool:
        """The first calibration of this key: nothing judged it but gates.yaml."""
        return self.supersedes is None

    @property
    def open_labels(self) -> list[dict]:
        """What a reader must be told of this calibration until a run confirms it: its own "first calibration" and
        "trusted by hand" and those it inherited, each {"label", "calibration", "reason"}."""
        own = [{"label": "first calibration", "calibration": self.calibration, "reason": None}] if self.first else []
        if self.trusted:
            own.append({"label": "trusted by hand", "calibration": self.calibration, "reason": self.trusted})
        return own + list(self.inherited or [])

    @property
    def label_lines(self) -> list[str]:
        """open_labels as the line that names the calibration says them ("trusted by hand: REASON"; an inherited one
        names the calibration it came from)."""
        out = []
        for label in self.open_labels:
            said = label["label"] + (f": {label['reason']}" if label.get("reason") else "")
            if label["calibration"] != self.calibration:
                said += f" (inherited from calibration {label['calibration']}, not confirmed since)"
            out.append(said)
        return out

    @property
    def short(self) -> str:
        """The report's one line: which calibration judged the check (and the power measured under it)."""
        # the statement without its failures ("deterministic over 5 repeats (...)", "held out: 0/5 repeats fail ...");
        # one stored before issue 45 reads "clean repeats 3/3 PASS (each judged by ...)"
        fp = self.false_positives.split("; ", 1)[0].split(" (each judged", 1)[0]
        return (f"calibrated {self.calibrated[:10]} (K={self.repeats}, {fp}): limit {self.drift_limit:.3g}, "
                f"tie gap {self.tie_gap:.3g}" + (f"; smallest caught: {self.power}" if self.power else ""))


# A calibration file names its format (records.migrations); the ones written before that are format 1 as they stand.
# Format 2 adds the provenance and the chain of trust; a format-1 calibration recorded neither (unknown build, judged
# by gates.yaml on its own build): it reads as a first calibration.
CALIBRATION_FORMAT = 2
CALIBRATION_FILE = StoredFormat("calibration", "format", CALIBRATION_FORMAT,
                                {0: lambda doc, **_: doc, 1: lambda doc, **_: {"judged_against": "gates.yaml", **doc}},
                                remedy="calibrate the arm again (`python -m harness calibrate`)")
OPTIONAL_FIELDS = ("power", "build", "arm", "model", "reference_key", "arm_config_sha", "judged_against", "supersedes",
                   "trusted", "inherited", "repeat_hashes", "floor_sha256", "sha256")
SEAL_FIELD = "sha256"


def seal_of(doc: dict) -> str:
    """The content hash of a calibration document: sha256 over its canonical JSON (sorted keys, no whitespace),
    the seal field itself left out."""
    body = {k: v for k, v in doc.items() if k != SEAL_FIELD}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sealed_document(calibration: Calibration) -> dict:
    """The document save_calibration writes: its format, the fields and the seal over both."""
    doc = {"format": CALIBRATION_FORMAT, **{k: v for k, v in calibration.__dict__.items() if k != SEAL_FIELD}}
    return {**doc, SEAL_FIELD: seal_of(doc)}


def file_sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


class CalibrationUnreadable(Exception):
    """A calibration file that exists but is no calibration (truncated, not UTF-8, another schema): the check it
    would judge cannot be judged."""


def load_calibration(path: Path, check: str) -> Calibration | None:
    """The calibration of `check` stored at `path`, or None when the check was never calibrated for this key;
    CalibrationUnreadable (naming the file and why) when the file is there but does not read as one."""
    file = path / f"{check}.calibration.json"
    if not file.is_file():
        return None
    try:
        doc = json.loads(file.read_bytes().decode("utf-8"))
        stored = doc.get(SEAL_FIELD) if isinstance(doc, dict) else None
        if stored is not None and stored != seal_of(doc):
            raise CalibrationUnreadable(f"{file}: edited after calibrate stored it (its content hash "
                                        f"{str(stored)[:12]} is recorded in it, its content hashes to "
                                        f"{seal_of(doc)[:12]})")
        raw = upgrade(doc, CALIBRATION_FILE)
        floor = path / f"{check}.jsonl"
        if raw.get("floor_sha256") is not None and raw["floor_sha256"] != file_sha256(floor):
            raise CalibrationUnreadable(f"{file}: its floor {floor.name} was edited or replaced after calibrate stored "
                                        "it (its content hash is not the one the calibration recorded)")
        return Calibration(**{k: raw[k] for k in Calibration.__dataclass_fields__ if k not in OPTIONAL_FIELDS},
                           **{k: raw.get(k) for k in OPTIONAL_FIELDS})
    except UnicodeDecodeError as exc:
        raise CalibrationUnreadable(f"{file}: not UTF-8 (byte {exc.start})") from None
    except FormatError as exc:
        raise CalibrationUnreadable(f"{file}: {exc}") from None
    except ValueError as exc:
        raise CalibrationUnreadable(f"{file}: not JSON ({exc})") from None
    except (KeyError, TypeError) as exc:
        raise CalibrationUnreadable(f"{file}: not a calibration (field {exc})") from None


def save_calibration(path: Path, calibration: Calibration, floor: list[RequestComparison], source: dict) -> None:
    """The check's mean floor, its source and its calibration, each file replaced atomically; a confirmation of the
    calibration it replaces goes with it."""
    path.mkdir(parents=True, exist_ok=True)
    check = calibration.check
    (path / f"{check}.confirmed.json").unlink(missing_ok=True)
    write_atomically(path / f"{check}.jsonl", "".join(c.model_dump_json() + "\n" for c in floor))
    write_atomically(path / f"{check}.source.json", json.dumps({**source, "accepted": calibration.calibrated}))
    floor_sha = file_sha256(path / f"{check}.jsonl")
    write_atomically(path / f"{check}.calibration.json",
                     json.dumps(sealed_document(replace(calibration, floor_sha256=floor_sha)), indent=1))


def record_power(path: Path, check: str, power: str) -> None:
    """Add the measured power (smallest planted fault caught, largest missed, by what) to a stored calibration."""
    calibration = load_calibration(path, check)
    if calibration is None:
        raise FileNotFoundError(f"no calibration of {check} at {path} to add the power to")
    write_atomically(path / f"{check}.calibration.json",
                     json.dumps(sealed_document(replace(calibration, power=power)), indent=1))


def load_confirmation(path: Path, calibration: Calibration) -> dict | None:
    """The run of another build that passed against this calibration (<check>.confirmed.json), None when none has:
    a confirmation of another calibration of the key (one it replaced) does not count."""
    try:
        doc = json.loads((path / f"{calibration.check}.confirmed.json").read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("calibration") == calibration.calibration else None


def save_confirmation(path: Path, check: str, doc: dict) -> None:
    write_atomically(path / f"{check}.confirmed.json", json.dumps(doc, indent=1))


def write_atomically(target: Path, text: str) -> None:
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


def load_floor(path: Path, check: str) -> Floor | None:
    """The floor of `check` stored at `path`, or None when none was accepted for this key."""
    comparisons_path = path / f"{check}.jsonl"
    if not comparisons_path.is_file():
        return None
    model = comparison_model(check)
    rows, _ = read_jsonl(comparisons_path)
    comparisons = []
    for row in rows:
        try:
            comparisons.append(model.model_validate(row))
        except ValueError:
            continue  # a line another schema wrote: the rest still pairs
    try:
        source = json.loads((path / f"{check}.source.json").read_text())
    except (OSError, ValueError):
        source = {}
    return Floor(comparisons, source) if comparisons else None


def save_floor(path: Path, check: str, comparisons_file: Path, source: dict) -> Path:
    """Copy a run's comparisons of `check` under the floor key, replacing an older floor (each file atomically)."""
    path.mkdir(parents=True, exist_ok=True)
    target = path / f"{check}.jsonl"
    shutil.copy(comparisons_file, target.with_suffix(".tmp"))
    os.replace(target.with_suffix(".tmp"), target)
    meta = path / f"{check}.source.json"
    meta.with_suffix(".tmp").write_text(json.dumps({**source, "accepted": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
    os.replace(meta.with_suffix(".tmp"), meta)
    return target
