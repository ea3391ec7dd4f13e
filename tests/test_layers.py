"""The data flow is one-way: each stage imports only the stages its __init__.py's `Imports:` line names (nothing
imports the pytest plugin or the CLI, the plugin nothing of qualify: qualify runs pytest), the house is at most
FLOORS stages high, and no module imports itself back through others, deferred imports included.
A stage that runs another as a subprocess (`"-m", "harness.X"` in an argv) depends on it as on an import; the bare
`"-m", "harness"` is the CLI. Inside a stage split into sub-packages (refcheck), its __init__.py names them bottom to
top and each imports only those below it. Read from the source, so a new upward import or cycle fails here, not in
review."""

import ast
import re

from harness.config.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "harness"
IMPORT = re.compile(r"^\s*(?:from|import) harness\.(\w+)|^\s*from harness import (\w+)", re.M)
RUNS = re.compile(r"""["']-m["'],\s*["']harness(?:\.(\w+))?[\w.]*["']""")
NAMED_PLUGIN = re.compile(r"""["']harness\.(\w+)""")  # the root conftest.py's pytest_plugins
# Stages on the longest import chain, the CLI and the root conftest.py (it loads the plugin) counted as floors too.
FLOORS = 8


def stages_under(root) -> list[str]:
    return sorted(p.name for p in (root / "harness").iterdir() if (p / "__init__.py").is_file())


def top_level_under(root) -> list[str]:
    return sorted(p.stem for p in (root / "harness").glob("*.py") if p.stem not in ("__init__", "__main__"))


STAGES = stages_under(REPO_ROOT)
TOP_LEVEL = top_level_under(REPO_ROOT)
# Commands printed for a user to run, not run by the harness: they name the CLI without depending on it.
PRINTED_COMMANDS = {"harness/serve/slurm_allocation.py": 1}


def declared_imports(stage: str) -> set[str]:
    """The stages a package's one-line docstring allows: `Imports: a, b.module, c.` ("nothing ...": none; "every
    stage": all the others)."""
    first = (PACKAGE / stage / "__init__.py").read_text().splitlines()[0]
    text = first.split("Imports:", 1)[1].strip().strip('"').rstrip(".").strip()
    if text.startswith("nothing"):
        return set()
    if text == "every stage":
        return set(STAGES) - {stage}
    return {part.strip().split(".")[0] for part in text.split(",")}


def test_each_stage_says_in_one_line_what_it_does_and_may_import():
    for stage in STAGES:
        first = (PACKAGE / stage / "__init__.py").read_text().splitlines()[0]
        assert first.startswith('"""') and first.endswith('"""') and "Imports:" in first, stage
        assert declared_imports(stage) <= set(STAGES), (stage, declared_imports(stage) - set(STAGES))


def dependencies(path, root=REPO_ROOT) -> list[str]:
    """The top-level harness names (stage packages or modules like cli) a file imports or runs with `-m`; `from
    harness import __version__` is the package root, no stage."""
    text = path.read_text()
    imported = [a or b for a, b in IMPORT.findall(text)]
    ran = [m or "cli" for m in RUNS.findall(text)]  # `-m harness` runs harness/__main__.py: the CLI
    return [d for d in imported + ran if d in set(stages_under(root)) | set(top_level_under(root))]


def test_every_stage_imports_only_what_its_init_allows():
    upward = [f"{path.relative_to(REPO_ROOT)} imports or runs harness.{dep}, not in its Imports: line"
              for stage in STAGES for path in sorted((PACKAGE / stage).rglob("*.py"))
              for dep in dependencies(path) if dep not in declared_imports(stage) | {stage}
              and not (dep == "cli" and str(path.relative_to(REPO_ROOT)) in PRINTED_COMMANDS)]
    assert upward == []


def test_no_stage_imports_the_plugin_or_the_cli():
    for stage in set(STAGES) - {"pytest_plugin"}:
        assert "pytest_plugin" not in declared_imports(stage) and "cli" not in declared_imports(stage), stage


def plugin_uses_of_qualify(root) -> list[str]:
    """The plugin's files that import or run harness.qualify: qualify runs pytest, so the plugin calling back into it
    is a loop at run time (a by-hand pytest is admitted and recorded by harness.admission, as qualify is)."""
    return [str(path.relative_to(root)) for path in sorted((root / "harness" / "pytest_plugin").rglob("*.py"))
            if "qualify" in dependencies(path, root)]


def test_the_plugin_imports_nothing_of_qualify():
    assert "qualify" not in declared_imports("pytest_plugin")
    assert plugin_uses_of_qualify(REPO_ROOT) == []


def floors(root) -> list[str]:
    """The longest chain of dependencies, top first: stages, cli.py and the root conftest.py (which names the plugin),
    each counted as one floor."""
    graph = {s: set() for s in stages_under(root)}
    for stage in graph:
        for path in (root / "harness" / stage).rglob("*.py"):
            graph[stage] |= set(dependencies(path, root)) - {stage, "cli"}  # cli: printed commands alone (above)
    graph["cli"] = set(dependencies(root / "harness" / "cli.py", root)) - {"cli"}
    graph["conftest.py"] = set(NAMED_PLUGIN.findall((root / "conftest.py").read_text())) & set(graph)
    chains: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in chains:
            below = [chain(d) for d in sorted(graph[node]) if d in graph]
            chains[node] = [node, *max(below, key=len, default=[])]
        return chains[node]

    return max((chain(n) for n in sorted(graph)), key=len)


def test_the_house_is_at_most_floors_high():
    assert len(floors(REPO_ROOT)) <= FLOORS, " -> ".join(floors(REPO_ROOT))


def copy_tree(root) -> None:
    """The real harness package and root conftest.py under `root`, for a planted fault."""
    for path in [*PACKAGE.rglob("*.py"), REPO_ROOT / "conftest.py"]:
        copy = root / path.relative_to(REPO_ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text(path.read_text())


def test_a_planted_plugin_import_of_qualify_fails(tmp_path):
    """The real tree with the import the plugin had (admit_run from qualify): a ninth floor, and named."""
    copy_tree(tmp_path)
    assert len(floors(tmp_path)) <= FLOORS and plugin_uses_of_qualify(tmp_path) == []
    planted = tmp_path / "harness" / "pytest_plugin" / "started_run.py"
    planted.write_text(planted.read_text() + "from harness.qualify.pipeline import qualify\n")
    assert plugin_uses_of_qualify(tmp_path) == ["harness/pytest_plugin/started_run.py"]
    assert floors(tmp_path)[:3] == ["conftest.py", "pytest_plugin", "qualify"]
    assert len(floors(tmp_path)) == FLOORS + 1


def test_only_the_entry_point_imports_or_runs_the_cli():
    # cli.py itself may run the CLI in a fresh process (`calibrate` runs each repeat as a `qualify`): no stage is
    # involved, so no layer is crossed.
    users = {str(p.relative_to(REPO_ROOT)): dependencies(p).count("cli") for p in sorted(PACKAGE.rglob("*.py"))}
    users = {p: n for p, n in users.items() if n and p not in ("harness/__main__.py", "harness/cli.py")}
    assert users == PRINTED_COMMANDS


def test_the_cli_and_top_level_modules_are_checked_too():
    """cli.py may import any stage (it dispatches); the other top-level modules import none: a new top-level module
    with imports of its own belongs in a stage."""
    assert "cli" in TOP_LEVEL and "qualify" in STAGES and "admission" in STAGES
    for name in set(TOP_LEVEL) - {"cli"}:
        assert dependencies(PACKAGE / f"{name}.py") == [], name
    assert set(dependencies(PACKAGE / "cli.py")) - {"cli"} <= set(STAGES)


def module_name(path, root=REPO_ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path, modules: set[str]) -> set[str]:
    """harness modules a file imports: top-level, inside functions, and in `if TYPE_CHECKING:` blocks (a cycle that
    only annotations close is still two modules that cannot be read apart: references.py <-> session.py was one).
    `from harness.x import y` counts harness.x.y where that is a module, else harness.x."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("harness")}
    return out & modules


def cycles_in(root) -> list[str]:
    """Every import cycle between the modules of the `harness` package under `root`, each as `a -> b -> a`."""
    files = {module_name(p, root): p for p in (root / "harness").rglob("*.py")}
    graph = {m: module_imports(p, set(files)) - {m} for m, p in files.items()}
    cycles, state = [], {}

    def visit(m: str, stack: list[str]) -> None:
        state[m] = "open"
        for dep in sorted(graph[m]):
            if state.get(dep) == "open" and not (m.startswith(dep + ".") or dep == m.rsplit(".", 1)[0]):
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_no_module_imports_itself_back():
    """Cycles between modules (gates.py <-> spec_decode_gates.py was one, hidden by a deferred import) make the import
    order matter and the layering a lie; each is named with its path. (A `-m` subprocess is a fresh interpreter: no
    import order, so no edge here; the layering test above counts it.)"""
    assert cycles_in(REPO_ROOT) == []


def plant(root, stage: str, modules: dict[str, str]) -> None:
    """A scratch `harness` package under `root` with one stage holding `modules` (name -> source)."""
    pkg = root / "harness" / stage
    pkg.mkdir(parents=True)
    for path in (root / "harness" / "__init__.py", pkg / "__init__.py"):
        path.write_text('"""x. Imports: nothing."""\n')
    for name, source in modules.items():
        (pkg / f"{name}.py").write_text(source)


def test_a_planted_cycle_fails(tmp_path):
    """The check finds a cycle hidden by a deferred import, as gates.py <-> spec_decode_gates.py was."""
    plant(tmp_path, "judge", {"gates": "from harness.judge.spec_decode_gates import gate\n",
                              "spec_decode_gates": "def gate():\n    from harness.judge import gates\n    return gates\n"})
    assert cycles_in(tmp_path) == ["harness.judge.gates -> harness.judge.spec_decode_gates -> harness.judge.gates"]


def test_a_cycle_closed_only_under_type_checking_fails(tmp_path):
    """The cycle the plugin had: references.py imported the session for its annotations, the session references."""
    plant(tmp_path, "pytest_plugin", {
        "session": "from harness.pytest_plugin.references import ReferenceOutputs\n",
        "references": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from harness.pytest_plugin.session import HarnessSession\n"})
    assert cycles_in(tmp_path) == [
        "harness.pytest_plugin.references -> harness.pytest_plugin.session -> harness.pytest_plugin.references"]


# A stage split into sub-packages names them in its __init__.py, e.g. refcheck's
# `# Floors, bottom to top (...): prompts, store, judging, send, prompt_sets.`
SUB_FLOORS = re.compile(r"^# Floors, bottom to top[^:]*: ([\w, ]+)\.$", re.M)


def sub_floors(root, stage: str) -> list[str]:
    found = SUB_FLOORS.search((root / "harness" / stage / "__init__.py").read_text())
    return [f.strip() for f in found.group(1).split(",")] if found else []


def floor_violations(root, stage: str) -> list[str]:
    """Each file of `stage` that imports one of its floors above its own (deferred and TYPE_CHECKING imports too),
    lies on no floor, or sits in a sub-package the floors line does not name."""
    order, prefix = sub_floors(root, stage), f"harness.{stage}."
    modules = {module_name(p, root) for p in (root / "harness").rglob("*.py")}
    out = []
    for path in sorted((root / "harness" / stage).rglob("*.py")):
        name, parts = path.relative_to(root), path.relative_to(root / "harness" / stage).parts
        if len(parts) == 1:
            out += [] if parts[0] == "__init__.py" else [f"{name} lies on no floor of {stage} ({', '.join(order)})"]
        elif parts[0] not in order:
            out.append(f"{name}: {parts[0]}/ is no floor that harness/{stage}/__init__.py names")
        else:
            floors_of = {d: d[len(prefix):].split(".")[0] for d in module_imports(path, modules) if d.startswith(prefix)}
            out += [f"{name} ({parts[0]}) imports {d}, on the floor {up} above it" for d, up in sorted(floors_of.items())
                    if up in order and order.index(up) > order.index(parts[0])]
    return out


def test_refchecks_floors_import_only_the_floors_below():
    """prompts -> store -> judging -> send -> prompt_sets, bottom to top: a reader names the floor of each module and
    a lower floor (prompts, the store) never reaches up into judging or a live server."""
    order = sub_floors(REPO_ROOT, "refcheck")
    assert order == ["prompts", "store", "judging", "send", "prompt_sets"]
    assert sorted(order) == sorted(p.parent.name for p in (PACKAGE / "refcheck").glob("*/__init__.py"))
    assert {s: floor_violations(REPO_ROOT, s) for s in STAGES if sub_floors(REPO_ROOT, s)} == {"refcheck": []}


def test_a_planted_upward_import_between_refchecks_floors_fails(tmp_path):
    """The real tree with a deferred import of a sender in a prompt module, and a module left beside the floors: each
    named with its path."""
    copy_tree(tmp_path)
    assert floor_violations(tmp_path, "refcheck") == []
    planted = tmp_path / "harness" / "refcheck" / "prompts" / "order.py"
    planted.write_text(planted.read_text() + "\n\ndef sent():\n    from harness.refcheck.send import batches\n"
                       "    return batches\n")
    (tmp_path / "harness" / "refcheck" / "loose.py").write_text("")
    assert floor_violations(tmp_path, "refcheck") == [
        "harness/refcheck/loose.py lies on no floor of refcheck (prompts, store, judging, send, prompt_sets)",
        "harness/refcheck/prompts/order.py (prompts) imports harness.refcheck.send.batches, on the floor send above it"]
