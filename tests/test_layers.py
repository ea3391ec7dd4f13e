"""The data flow is one-way: each stage imports only the stages its __init__.py's `Imports:` line names (nothing
imports the pytest plugin or the CLI), and no module imports itself back through others, deferred imports included.
Read from the source, so a new upward import or cycle fails here, not in review."""

import ast
import re

from harness.config.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "harness"
STAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
IMPORT = re.compile(r"^\s*(?:from|import) harness\.(\w+)", re.M)


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


def test_every_stage_imports_only_what_its_init_allows():
    upward = [f"{path.relative_to(REPO_ROOT)} imports harness.{dep}, not in its Imports: line"
              for stage in STAGES for path in sorted((PACKAGE / stage).rglob("*.py"))
              for dep in IMPORT.findall(path.read_text()) if dep not in declared_imports(stage) | {stage}]
    assert upward == []


def test_no_stage_imports_the_plugin_or_the_cli():
    for stage in set(STAGES) - {"pytest_plugin"}:
        assert "pytest_plugin" not in declared_imports(stage) and "cli" not in declared_imports(stage), stage


def module_name(path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path, modules: set[str]) -> set[str]:
    """harness modules a file imports at run time: top-level or inside functions; `if TYPE_CHECKING:` blocks left out
    (annotations only). `from harness.x import y` counts harness.x.y where that is a module, else harness.x."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs or {node.module}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("harness")}
    return out & modules


def test_no_module_imports_itself_back():
    """Cycles between modules (gates.py <-> spec_decode.py was one, hidden by a deferred import) make the import order
    matter and the layering a lie; each is named with its path."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: runtime_imports(p, set(files)) - {m} for m, p in files.items()}
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
    assert cycles == []
