"""Scratch copies of the installed vllm with faults planted (the installed package is never patched), and the arm
that makes a server import one (server.env PYTHONPATH)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from harness.faults import mutations as mut
from harness.faults.length_faults.registry import TABLES, TRACED, combined, table
from harness.faults.length_faults.tables import ENV_L
from harness.faults.mutations import Fault, MutationError
from harness.probes.ask import run_probe


def installed_site(python: str | None = None) -> Path:
    """The site-packages directory holding the server interpreter's vllm (probe `site`: found without importing
    vllm)."""
    if python is None:
        from harness.config.paths import server_python
        python = server_python()
    out = run_probe(python, "site")
    if out.returncode != 0 or not out.stdout.strip():
        raise MutationError(f"{python} cannot find vllm: {out.stderr.strip()[-300:]}")
    return Path(out.stdout.strip()).parent


def _link_tree(src: Path, dst: Path) -> None:
    """dst mirrors src: real directories, every file a symlink to the original."""
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            (dst / rel / f).symlink_to(Path(root) / f)


def make_scratch(name: str | Sequence[str], out: Path, site: Path, which: str = "cpu") -> dict:
    """out/vllm: the installed package as links, the fault's files real copies with the fault applied; the wheel's
    other top-level entries named vllm* (dist-info, bundled .libs that extension modules find through $ORIGIN) are
    linked beside it. Rebuilt from scratch every time; `out` must not be the installed site. Several names (a list):
    all of them in one copy (`combined`), the record's fault NAME+NAME+..."""
    fault = combined([name] if isinstance(name, str) else list(name), table(which))
    if out.resolve() == site.resolve():
        raise MutationError(f"{out} is the installed site: the scratch copy goes elsewhere")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for entry in sorted(site.iterdir()):
        if entry.name == "vllm":
            _link_tree(entry, out / "vllm")
        elif entry.name.lower().startswith("vllm"):
            (out / entry.name).symlink_to(entry)
    for rel in {e.path for e in fault.edits}:
        link = out / rel
        if not link.is_symlink():
            raise MutationError(f"{rel} is not in the installed vllm at {site}")
        link.unlink()
        shutil.copy2(site / rel, link)
    record = mut.apply(fault.name, out, {fault.name: fault})
    record["site"] = str(site)
    return record


def replant(name: str | Sequence[str], out: Path, site: Path, which: str = "cpu") -> dict:
    """A scratch copy made by make_scratch with its planted files replaced in place: the files planted before copied
    from `site` again, then `name` planted (another build at the same path, so an arm's PYTHONPATH and calibration key
    stay). Seconds where rebuilding the 6,600 links took 30-40 s on a busy disk (the chain-of-trust e2e's new build)."""
    fault = combined([name] if isinstance(name, str) else list(name), table(which))
    state = out / mut.STATE / "state.json"
    before = json.loads(state.read_text())["files"] if state.is_file() else {}
    for rel in {*before, *(e.path for e in fault.edits)}:
        if not (site / rel).is_file():
            raise MutationError(f"{rel} is not in the installed vllm at {site}")
        (out / rel).unlink(missing_ok=True)
        shutil.copy2(site / rel, out / rel)
    shutil.rmtree(out / mut.STATE, ignore_errors=True)
    record = mut.apply(fault.name, out, {fault.name: fault})
    record["site"] = str(site)
    return record


def arm_yaml(name: str, length: int, scratch: Path, base: str = "cpu-smoke", reference: str | None = "cpu-ref",
             pythonpath_tail: str = "") -> str:
    """A candidate arm: `base` with the server importing the scratch copy first (`name`: a scratch's fault, one or
    several joined by '+')."""
    known = {f.name: f for faults in TABLES.values() for f in faults}
    fault = Fault(name, "", "", tuple(e for n in name.split("+") for e in known[n].edits))
    path = f"{scratch}{os.pathsep + pythonpath_tail if pythonpath_tail else ''}"
    what = f"{base} with a planted length fault past L={length}: {fault.name} (scratch vLLM {scratch})"
    # judged by the base arm's calibration where it has one: the fault is what differs from that build
    lines = [f"description: {json.dumps(what)}", f"extends: {base}", f"calibration_from: {base}"]
    if reference:
        lines.append(f"reference: {reference}")
    lines += ["server:", "  env:", f"    PYTHONPATH: {json.dumps(path)}", f"    {ENV_L}: \"{length}\""]
    if any(e.path in TRACED for e in fault.edits):  # L is baked into the compiled graph: no cached graph of another L
        lines.append("    VLLM_DISABLE_COMPILE_CACHE: \"1\"")
    return "\n".join(lines) + "\n"


def arm_name(base: str, name: str, length: int) -> str:
    return f"{base}-{name.replace('_', '-').lower()}-{length}"
