"""An evidence page's calibration tables, rebuilt from the calibration JSON beside it (no server, no GPU).

    python benchmarks/calibration_evidence.py docs/evidence/h200-2026-12-04b/calibration-final.json \
        --hand-set-from 872cdda --arm gpu-mla

Prints two Markdown blocks for the page, each between the markers tests/benchmarks/test_calibration_evidence.py reads:
- `limits`: every number of each check the JSON holds, "before" as the JSON records it (what gates.yaml gave the
  check in the tree that ran `calibrate`);
- `hand-set`: the calibrated limits beside the limits a committed gates.yaml set by hand (--hand-set-from REV reads
  REV:configs/gates.yaml through git), each with its direction, and one sentence counting them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import yaml

LIMITS_HEADER = ("| check (vs) | exact (K repeats) | clean max drift | run-to-run move (max) "
                 "| divergences (largest gap) | drift limit before -> after | tie gap before -> after "
                 "| leave-one-out |\n"
                 "|---|---|---|---|---|---|---|---|")
HAND_SET_HEADER = ("| check | drift limit: hand-set -> calibrated | change "
                   "| tie gap: hand-set -> calibrated | change |\n|---|---|---|---|---|")


def change(before: float, after: float) -> str:
    if after == before:
        return "same"
    if before == 0:
        return "rose from 0"
    return f"{before / after:.3g}x tighter" if after < before else f"rose {after / before:.3g}x"


def limits_table(calibration: dict) -> str:
    rows = []
    for c in calibration["checks"]:
        s, before, after, fp = c["spread"], c["before"], c["after"], c["false_positives"]
        largest = f"{max(s['flip_gaps']):.3g}" if s["flip_gaps"] else "none"
        move = f"{s['run_to_run_move_max']:.3g}" if "run_to_run_move_max" in s else "not recorded"
        rows.append(f"| {c['check']} ({c['reference']}) | {s['exact_rate']:.0%} ({s['repeats']}) "
                    f"| {s['max_drift']:.3g} | {move} | {s['divergences']} ({largest}) "
                    f"| {before['drift_limit']:g} -> {after['drift_limit']:.3g} "
                    f"| {before['tie_gap']:g} -> {after['tie_gap']:.3g} | {fp['passed']}/{fp['repeats']} PASS |")
    checks = calibration["checks"]
    drift = {c["check"]: (c["before"]["drift_limit"], c["after"]["drift_limit"]) for c in checks}
    tie = {c["check"]: (c["before"]["tie_gap"], c["after"]["tie_gap"]) for c in checks}
    sentences = [f"Against the JSON's own before: drift limits {counted(drift)}; tie gaps {counted(tie)}."]
    # A check whose repeats are identical passes any leave-one-out by construction: that PASS is no rate.
    identical = [c["check"] for c in checks if c["spread"].get("run_to_run_move_max") == 0]
    if identical:
        sentences.append(f"Repeats identical (run-to-run move 0): {', '.join(identical)}. Their leave-one-out PASS "
                         "holds by construction (a held-out repeat equals the ones its limits came from) and states "
                         "no false-positive rate.")
    return "\n".join([LIMITS_HEADER, *rows, "", *sentences])


def counted(pairs: dict[str, tuple[float, float]]) -> str:
    """'4 tighter (3.13x-25.6x: a, b), 2 rose (c, d)' for {check: (before, after)}."""
    tighter = {k: b / a for k, (b, a) in pairs.items() if a < b}
    rose = [k for k, (b, a) in pairs.items() if a > b]
    same = [k for k, (b, a) in pairs.items() if a == b]
    parts = [f"{len(tighter)} tighter" + (f" ({min(tighter.values()):.3g}x-{max(tighter.values()):.3g}x: "
                                          f"{', '.join(tighter)})" if tighter else "")]
    parts.append(f"{len(rose)} rose" + (f" ({', '.join(rose)})" if rose else ""))
    if same:
        parts.append(f"{len(same)} unchanged ({', '.join(same)})")
    return ", ".join(parts)


def against_hand_set(calibration: dict, hand_set: dict[str, tuple[float, float]], source: str) -> str:
    """hand_set: {check: (drift limit, tie gap)} as a committed gates.yaml gave them."""
    rows, drift, tie = [], {}, {}
    for c in calibration["checks"]:
        check, after = c["check"], c["after"]
        drift[check] = (hand_set[check][0], after["drift_limit"])
        tie[check] = (hand_set[check][1], after["tie_gap"])
        rows.append(f"| {check} | {drift[check][0]:g} -> {drift[check][1]:.3g} | {change(*drift[check])} "
                    f"| {tie[check][0]:g} -> {tie[check][1]:.3g} | {change(*tie[check])} |")
    sentence = (f"Against the limits set by hand in {source}: drift limits {counted(drift)}; "
                f"tie gaps {counted(tie)}.")
    return "\n".join([HAND_SET_HEADER, *rows, "", sentence])


def hand_set_limits(gates: dict, arm: str, checks: list[str]) -> dict[str, tuple[float, float]]:
    """{check: (drift limit, tie gap)} from one gates.yaml document: the defaults' reference_checks, then the arm's
    own section's (the gpu-mla arms extended nothing when limits were set by hand)."""
    section = {**gates["defaults"]["reference_checks"], **(gates["arms"].get(arm) or {}).get("reference_checks", {})}
    per_check = section.get("drift_limits") or {}
    return {check: (per_check.get(check, section["drift_limit"]), section["tie_gap"]) for check in checks}


def block(name: str, body: str) -> str:
    return f"<!-- calibration_evidence: {name} -->\n{body}\n<!-- calibration_evidence: end -->"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("calibration", type=Path, help="a calibration JSON (calibration.json of `harness calibrate`)")
    p.add_argument("--hand-set-from", metavar="REV", help="a commit whose configs/gates.yaml set the limits by hand")
    p.add_argument("--arm", help="the arm whose hand-set limits to read (with --hand-set-from)")
    args = p.parse_args(argv)
    calibration = json.loads(args.calibration.read_text())
    print(block("limits", limits_table(calibration)))
    if args.hand_set_from:
        shown = subprocess.run(["git", "show", f"{args.hand_set_from}:configs/gates.yaml"], capture_output=True,
                               text=True)
        if shown.returncode:
            print(f"--hand-set-from {args.hand_set_from}: git cannot read configs/gates.yaml there: "
                  f"{shown.stderr.strip()}", file=sys.stderr)
            return 2
        checks = [c["check"] for c in calibration["checks"]]
        hand_set = hand_set_limits(yaml.safe_load(shown.stdout), args.arm or calibration["arm"], checks)
        print()
        print(block("hand-set", against_hand_set(calibration, hand_set, f"{args.hand_set_from}'s configs/gates.yaml")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
