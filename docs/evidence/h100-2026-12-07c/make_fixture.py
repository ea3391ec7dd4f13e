"""Builds tests/fixtures/h100_anchor_2026_12_07c.json.gz from this folder's archives: the reference's teacher-forced
logprobs and their float32 scores (state.tgz) and the candidate logprobs of gpu-mla's clean calibration repeats
(cal2-gpu-mla-r1..r5) and of two faulty builds (runs-call2.tar.gz: keys_past_L_ignored and precision_loss_past_L 0.05
past 8,000 tokens), rounded to 7 significant digits.

    .venv/bin/python docs/evidence/h100-2026-12-07c/make_fixture.py
"""

import gzip
import io
import json
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE.parents[2] / "tests" / "fixtures" / "h100_anchor_2026_12_07c.json.gz"
REF = "references/gpu-mla-ref-2023f0b8a81fbd54"
RUNS = {"cal2-gpu-mla-r1": "state.tgz", "cal2-gpu-mla-r2": "state.tgz", "cal2-gpu-mla-r3": "state.tgz",
        "cal2-gpu-mla-r4": "state.tgz", "cal2-gpu-mla-r5": "state.tgz",
        "fault-keys_past_L_ignored-8000": "runs-call2.tar.gz",
        "fault-precision_loss_past_L-8000-0.05": "runs-call2.tar.gz"}


def member(archive: str, name: str) -> bytes:
    with tarfile.open(HERE / archive) as tar:
        for m in tar.getmembers():
            if m.name.lstrip("./") == name:
                return tar.extractfile(m).read()
    raise KeyError(f"{name} not in {archive}")


def rounded(xs):
    return [None if x is None else float(f"{x:.7g}") for x in xs]


def main() -> None:
    reference = json.loads(member("state.tgz", f"{REF}.json"))["outputs"]
    fp32 = json.loads(member("state.tgz", f"{REF}.fp32.json"))["requests"]
    runs = {}
    for run, archive in RUNS.items():
        prefix = "reports/" if archive == "state.tgz" else ""
        with tarfile.open(HERE / archive) as tar:
            names = [m.name.lstrip("./") for m in tar.getmembers()
                     if m.name.lstrip("./").startswith(f"{prefix}{run}/") and "teacher_forcing_vs" in m.name]
        assert len(names) == 1, (run, names)
        rows = [json.loads(line) for line in io.StringIO(member(archive, names[0]).decode())]
        runs[run] = {r["request"]: {"prompt_tokens": r["prompt_tokens"], "logprobs": rounded(r["candidate_logprobs"])}
                     for r in rows}
    requests = sorted(next(iter(runs.values())))
    data = {"source": "docs/evidence/h100-2026-12-07c.md (one H100, vLLM 0.25.0, gpu-mla vs gpu-mla-ref)",
            "reference": {r: rounded(reference[r]["logprobs"]) for r in requests},
            "fp32": {r: rounded(fp32[r]["logprobs"] if isinstance(fp32[r], dict) else fp32[r]) for r in requests},
            "runs": runs}
    OUT.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))
    print(f"{OUT}: {OUT.stat().st_size:,} bytes, {len(requests)} requests, {len(runs)} runs")


if __name__ == "__main__":
    main()
