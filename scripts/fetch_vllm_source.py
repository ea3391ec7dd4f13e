"""Fetch one vLLM release's Python sources from the package registry into a directory (vllm/**/*.py only).

    python scripts/fetch_vllm_source.py --version 0.25.0 --out .vllm-src/0.25.0

The tests that tie the planted-fault snippets (harness/faults/mutations.py) and the MLA gather locator to real vLLM
read this tree. The wheel, not the sdist: pip cannot download an sdist without building its metadata, which for vLLM
needs its pinned torch. The wheel is deleted once its .py files are out; the tree appears whole or not at all.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# Any manylinux x86_64 wheel holds the same Python files; pinning the platform makes the download work on any host.
PIP_TARGET = ["--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]


def fetch(version: str, out: Path) -> str:
    t0 = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vllm-src-", dir=out.parent) as tmp:
        tmp = Path(tmp)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        *PIP_TARGET, "-d", str(tmp / "wheel"), f"vllm=={version}"], check=True)
        wheel = next((tmp / "wheel").glob("vllm-*.whl"))
        wheel_mb = wheel.stat().st_size / 2**20
        t_download = time.monotonic() - t0
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if n.startswith("vllm/") and n.endswith(".py")]
            z.extractall(tmp / "tree", members=names)
        tree_mb = sum(p.stat().st_size for p in (tmp / "tree").rglob("*.py")) / 2**20
        shutil.rmtree(out, ignore_errors=True)
        (tmp / "tree").rename(out)
    return (f"vLLM {version} sources in {out}: {len(names)} .py files, {tree_mb:.0f} MB, from a {wheel_mb:.0f} MB "
            f"wheel; download {t_download:.0f} s, total {time.monotonic() - t0:.0f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(fetch(args.version, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
