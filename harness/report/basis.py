"""How a run's verdict was reached, in one clause for its first line (pure): what judged the candidates' reference
checks (read from each record's `judged_by`) and which tests were skipped; a PASSED over checks trusted by hand, or
over skipped families, must say so where it is read first."""

from __future__ import annotations

import re
from collections import Counter

from harness.records.meaning import of_kind
from harness.records.schema import OutcomeRecord, Record, ReferenceCheckRecord

# CheckLimits.judged_by is the calibration's line, then "; "-joined parts: its labels ("first calibration", "trusted
# by hand: REASON", either with " (inherited from calibration ID, not confirmed since)"), "run on the calibration's
# own build", "this run: repeat ...", and judge_floor's "alpha A/m per check, ..." (the run's error budget).
PARTS = re.compile(r"; (?=first calibration|trusted by hand: |run on the calibration's own build|this run: repeat |"
                   r"alpha \S+ per check)")
WARNINGS = ("first calibration", "trusted by hand: ")  # what a PASSED must not hide
NAMES_SHOWN = 4
# error_budget.Family.text in judged_by, and the "caught at 80 %: X" of each test in `detectable` (drift_floor's
# run-level floor test, fp32_anchor's run anchor): the run's budget and the power it leaves
BUDGET = re.compile(r"alpha (\S+)/(\d+) per check, (\S+) % per run")
CAUGHT = re.compile(r"(float32 anchor: )?smallest (?:mean shift|rise of the excess) caught at (\d+) %: ([-+\d.e]+)")


def judged_kind(judged_by: str | None) -> str:
    """'calibrated', 'gates.yaml', 'unreadable' or 'unrecorded' (a record written before judged_by existed)."""
    if not judged_by:
        return "unrecorded"
    if judged_by.startswith("calibrated"):
        return "calibrated"
    return "unreadable" if judged_by.startswith("unreadable calibration") else "gates.yaml"


def warning_labels(judged_by: str | None) -> list[str]:
    """A calibrated check's labels a reader must see: 'first calibration', 'trusted by hand: REASON' (as written,
    inherited ones naming their calibration); none for a check not judged by a calibration."""
    if judged_kind(judged_by) != "calibrated":
        return []
    return [part for part in PARTS.split(judged_by)[1:] if part.startswith(WARNINGS)]


def latest_checks(records: list[Record], candidates: list[str]) -> list[ReferenceCheckRecord]:
    """Each candidate's reference checks, the latest record of each (arm, reference, check)."""
    by_key = {(r.arm, r.reference, r.check): r for r in of_kind(records, ReferenceCheckRecord) if r.arm in candidates}
    return list(by_key.values())


def skipped_tests(records: list[Record], candidates: list[str]) -> list[str]:
    """The candidates' tests whose latest outcome is skipped, by short name ('kv_pressure', 'spec_decode')."""
    latest = {(r.arm, r.test): r for r in of_kind(records, OutcomeRecord) if r.arm in candidates}
    names = []
    for (arm, test), r in latest.items():
        if r.outcome == "skipped":
            name = test.split("::")[-1].removeprefix("test_").removesuffix(f"[{arm}]")
            names.append(name if name not in names else f"{name} ({arm})")
    return names


def calibration_clause(checks: list[ReferenceCheckRecord]) -> list[str]:
    """What judged the checks, warnings first: trusted by hand (each reason), first calibration, then the count."""
    if not checks:
        return ["no reference check judged"]
    kinds = Counter(judged_kind(r.judged_by) for r in checks)
    n, cal = len(checks), kinds["calibrated"]

    def of(k: int) -> str:  # "(3 of 11 checks)" where a label covers only some of the calibrated checks
        return "" if k == cal else f" ({k} of {n} checks)"

    labels = Counter(label for r in checks for label in dict.fromkeys(warning_labels(r.judged_by)))
    trusted = [(label, k) for label, k in labels.items() if label.startswith("trusted")]  # the gravest first
    firsts = [(label, k) for label, k in labels.items() if label.startswith("first")]
    out = [f"calibration {label}{of(k)}" for label, k in trusted] + [f"{label}{of(k)}" for label, k in firsts]
    seeds = kinds["gates.yaml"]
    if cal == n:
        out.append(f"{n} reference check{'s' * (n > 1)} calibrated")
    elif cal:
        out.append(f"{cal} of {n} reference checks calibrated" + (f", {seeds} by gates.yaml limits" if seeds else ""))
    elif seeds:
        out.append(f"{seeds if seeds == n else f'{seeds} of {n}'} reference check{'s' * (n > 1)} by gates.yaml "
                   "limits, not calibrated")
    if k := kinds["unreadable"]:
        out.append(f"{k} reference check{'s' * (k > 1)} with an unreadable calibration")
    if k := kinds["unrecorded"]:
        out.append(f"{k} reference check{'s' * (k > 1)} with no record of what judged {'them' if k > 1 else 'it'}")
    return out


def budget_clause(checks: list[ReferenceCheckRecord]) -> list[str]:
    """The run's family-wise budget and the range over checks of the smallest shift each catches at the stated power
    ('error budget 1 % per run (m = 5), caught at 80 %: X (check) to Y (check)'); [] where none states it."""
    budgets = {m.groups() for r in checks if (m := BUDGET.search(r.judged_by or ""))}
    if not budgets:
        return []
    per_run = ", ".join(sorted(f"{pct} % per run (m = {m})" for _, m, pct in budgets))
    caught = []
    for r in checks:
        found = [(float(x), f"{r.check}, float32 anchor" if anchor else r.check, power)
                 for anchor, power, x in CAUGHT.findall(r.detectable or "")]
        if found:
            caught.append(min(found))
    if not caught:
        return [f"error budget {per_run}"]
    low, high = min(caught), max(caught)
    span = f"{low[0]:.2g} ({low[1]})" + (f" to {high[0]:.2g} ({high[1]})" if high != low else "")
    return [f"error budget {per_run}, smallest shift caught at {low[2]} %: {span}"]


def verdict_basis(records: list[Record], candidates: list[str]) -> str:
    """'calibration trusted by hand: REASON; first calibration; 11 reference checks calibrated; error budget 1 % per
    run (m = 11), smallest shift caught at 80 %: ...; 0 tests skipped'."""
    skipped = skipped_tests(records, candidates)
    shown = ", ".join(skipped[:NAMES_SHOWN]) + (f", +{len(skipped) - NAMES_SHOWN} more"
                                                 if len(skipped) > NAMES_SHOWN else "")
    skips = f"{len(skipped)} test{'s' * (len(skipped) != 1)} skipped" + (f": {shown}" if skipped else "")
    checks = latest_checks(records, candidates)
    return "; ".join([*calibration_clause(checks), *budget_clause(checks), skips])
