"""One compact JSON per end-to-end sensitivity run (device script, mutation benchmark): the reference checks'
verdicts as recorded, plus the paired noise-floor tests of this run's drift against the last good run of the same
arm pair and prompt set, and the smallest shift the run could have detected.

    python -m harness.report.e2e_summary --run reports/e2e-control --arm gpu-dcp2 --floor /tmp/keep/e2e-floor \
        --label control --out $OUT/e2e-control.json [--qualify-exit 0] [--calibration lse.json]

The first `control*` run's comparisons become the floor; a later `control*` run gives the noise (noise.json) every
later run's detectable shift is computed from. I/O only; the judgement is harness/judge/drift_floor.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from harness.judge.drift_floor import (
    detection_sentence,
    minimum_detectable_shift,
    paired_drift_test,
    paired_sd,
    per_position,
    per_request,
    smallest_detectable_offset,
)
from harness.records.schema import comparison_model

CHECK_FILES = {"prefix_reuse": "prefix_reuse_comparisons.jsonl", "graph_replay": "graph_replay_vs_*_comparisons.jsonl",
               "teacher_forcing": "teacher_forcing_vs_*_comparisons.jsonl"}


def read_lines(path: Path, model) -> list:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(model.model_validate_json(line))
        except ValueError:
            continue  # a truncated last line: the rest still counts
    return out


def load_comparisons(arm_dir: Path) -> dict[str, list]:
    found = {}
    for check, pattern in CHECK_FILES.items():
        paths = sorted(p for p in arm_dir.glob(pattern) if "_eager" not in p.name)
        if paths:
            found[check] = read_lines(paths[0], comparison_model(check))
    return found


def measures(comparisons: dict[str, list]) -> dict[str, tuple[dict, str, str]]:
    """name -> ({key: value}, method, what it is)."""
    gen = {f"{check}/{k}": v for check in ("prefix_reuse", "graph_replay")
           for k, v in per_request(comparisons.get(check, [])).items()}
    decode = {f"{check}/{k}": v for check in ("prefix_reuse", "graph_replay")
              for k, v in per_position(comparisons.get(check, [])).items()}
    tf = comparisons.get("teacher_forcing", [])
    return {
        "generation_max_drift": (gen, "wilcoxon", "per-request max |delta logprob| before the first divergence"),
        "generation_positions": (decode, "sign", "per-position |delta| of the decode steps before the first "
                                 "divergence (every one through the DCP combine)"),
        "tf_mean_drift": (per_request(tf, "mean_drift"), "wilcoxon", "teacher-forced per-request mean |delta|"),
        "tf_max_drift": (per_request(tf), "wilcoxon", "teacher-forced per-request max |delta|"),
        "tf_positions": (per_position(tf), "sign", "teacher-forced per-position |delta|"),
    }


def check_records(run_dir: Path, arm: str) -> dict[str, dict]:
    out = {}
    path = run_dir / "results.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("kind") == "reference_check" and r.get("arm") == arm:
            out[r["check"]] = {k: r.get(k) for k in ("passed", "requests", "exact_matches", "tie_flips", "max_drift",
                                                     "first_divergence_min", "status", "detail")}
        if r.get("kind") == "server":
            out.setdefault("_servers", {})[r["arm"]] = {"status": r.get("status"), "startup_s": r.get("startup_s")}
    return out


def summarize(run_dir: Path, arm: str, floor_dir: Path, label: str, calibration: list[tuple[float, float]],
              qualify_exit: int | None) -> dict:
    arm_dir = run_dir / arm
    comparisons = load_comparisons(arm_dir)
    records = check_records(run_dir, arm)
    servers = records.pop("_servers", {})
    summary: dict = {"label": label, "run": run_dir.name, "arm": arm, "qualify_exit": qualify_exit,
                     "checks": records, "servers": servers,
                     "reference_captured_this_run": any(a != arm for a in servers)}
    tf = comparisons.get("teacher_forcing", [])
    summary["teacher_forcing_positions"] = {"scored": sum(c.reference_tokens for c in tf),
                                            "dcp_decode_path": sum(c.decode_path_positions for c in tf)}
    copies = [c for c in comparisons.get("graph_replay", []) if c.request.startswith("copy")]
    summary["copy_prompts"] = [{"request": c.request, "exact": c.exact, "first_divergence": c.first_divergence,
                                "max_drift": c.max_drift} for c in copies]
    floor_files = sorted(floor_dir.glob("*_comparisons.jsonl")) if floor_dir.is_dir() else []
    if not floor_files:
        if label.startswith(("control", "clean")):  # the mutation script labels its control run "clean"
            floor_dir.mkdir(parents=True, exist_ok=True)
            for p in arm_dir.glob("*_comparisons.jsonl"):
                shutil.copy(p, floor_dir / p.name)
            (floor_dir / "source.json").write_text(json.dumps({"label": label, "run": run_dir.name}))
            summary["floor"] = f"stored from this run ({label}) in {floor_dir}"
        else:
            summary["floor"] = f"none in {floor_dir}: run the control first; no paired test possible"
            summary["paired"] = {"verdict": "FAIL: not enough data (no known-good floor)"}
        return summary
    source = json.loads((floor_dir / "source.json").read_text()) if (floor_dir / "source.json").is_file() else {}
    floor_name = f"the last good run {source.get('run', floor_dir)!s} (same arm pair, same prompt set)"
    cand, floor = measures(comparisons), measures(load_comparisons(floor_dir))
    noise_path = floor_dir / "noise.json"
    noise = json.loads(noise_path.read_text()) if noise_path.is_file() else {}
    paired, detect, new_noise = {}, {}, {}
    for name, (values, method, what) in cand.items():
        v = paired_drift_test(values, floor[name][0], floor_name, measure=what, method=method)
        paired[name] = {"passed": v.passed, "pairs": v.pairs, "p_value": v.p_value, "median_shift": v.median_shift,
                        "mean_shift": v.mean_shift, "sentence": v.sentence}
        sd, n = paired_sd(values, floor[name][0])
        new_noise[name] = {"paired_sd": sd, "pairs": n}
        base = noise.get(name, {"paired_sd": sd, "pairs": n})
        mds = minimum_detectable_shift(base["paired_sd"], base["pairs"], method=method, resolution=1e-6) \
            if base["paired_sd"] == base["paired_sd"] else None
        offset = smallest_detectable_offset(mds, calibration) if name == "tf_mean_drift" else None
        detect[name] = {"shift": mds, "noise_from": "repeat of the control" if name in noise else "this run vs floor",
                        "smallest_lse_offset": offset,
                        "sentence": detection_sentence(mds, base["pairs"], floor_name, what, offset)}
    if label.startswith("control") and not noise:
        noise_path.write_text(json.dumps(new_noise, indent=1))
    summary["floor"] = floor_name
    summary["paired"] = paired
    summary["detectable"] = detect
    # A test without enough pairs (e.g. the candidate's server died) is no evidence of a clean run: FAIL, not skipped.
    summary["paired_verdict"] = "PASS" if all(p["passed"] for p in paired.values()) else "FAIL"
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--arm", required=True)
    p.add_argument("--floor", type=Path, required=True)
    p.add_argument("--label", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--qualify-exit", type=int, default=None)
    p.add_argument("--calibration", type=Path, default=None,
                   help="JSON [[lse_offset, mean drift shift], ...] measured by the mutation benchmark")
    args = p.parse_args(argv)
    calibration = [tuple(x) for x in json.loads(args.calibration.read_text())] if args.calibration else []
    summary = summarize(args.run, args.arm, args.floor, args.label, calibration, args.qualify_exit)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(json.dumps({k: summary.get(k) for k in ("label", "qualify_exit", "paired_verdict", "floor")}))
    for name, v in (summary.get("paired") or {}).items():
        if isinstance(v, dict):
            print(f"  {name}: {v['sentence']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
