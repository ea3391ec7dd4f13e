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


def _link_tree(src: Path, dst: Path, planted: set[Path] = frozenset()) -> None:
    """dst mirrors src through links: a directory on the way to a `planted` file (paths relative to src) is real, its
    entries mirrored likewise, and so is its __pycache__ (a patched module's bytecode lands there, never in the
    installed package); every other entry is one link to its original (not one link per file: a busy disk took tens
    of seconds to write those)."""
    dst.mkdir(parents=True, exist_ok=True)
    ways = {p.parts[0] for p in planted if len(p.parts) > 1} | {"__pycache__"}
    for entry in sorted(src.iterdir()):
        if entry.name in ways and entry.is_dir() and not entry.is_symlink():
            _link_tree(entry, dst / entry.name, {Path(*p.parts[1:]) for p in planted if p.parts[0] == entry.name})
        else:
            (dst / entry.name).symlink_to(entry)


def _real_parents(out: Path, rel: str) -> None:
    """Every directory on the way to out/rel real (a linked one remade as make_scratch makes them), so that what is
    written there never goes through a link into the installed package."""
    here = out
    for part in Path(rel).parent.parts:
        here = here / part
        if here.is_symlink():
            target = Path(os.readlink(here))
            here.unlink()
            _link_tree(target, here)


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
            _link_tree(entry, out / "vllm", {Path(e.path).relative_to("vllm") for e in fault.edits
                                             if Path(e.path).parts[0] == "vllm"})
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
    stay); a planted file in a directory make_scratch linked whole gets real directories on its way first."""
    fault = combined([name] if isinstance(name, str) else list(name), table(which))
    state = out / mut.STATE / "state.json"
    before = json.loads(state.read_text())["files"] if state.is_file() else {}
    for rel in {*before, *(e.path for e in fault.edits)}:
        if not (site / rel).is_file():
            raise MutationError(f"{rel} is not in the installed vllm at {site}")
        _real_parents(out, rel)
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
