"""The data flow is one-way: each stage imports only the stages its __init__.py names (nothing imports the pytest
plugin or the CLI). Read from the source, so a new upward import fails here, not in review."""

import re

from harness.config.paths import REPO_ROOT

ALLOWED = {
    "config": set(), "console": set(), "plan": {"config"}, "serve": {"config", "plan", "console"},
    "records": {"config"}, "measure": {"config", "plan", "serve", "records", "console"},
    "refcheck": {"config", "plan", "serve", "measure", "records", "tinymodel"},
    "judge": {"config", "records"}, "report": {"config", "plan", "records", "judge"},
    "pytest_plugin": {"config", "plan", "serve", "measure", "refcheck", "judge", "records", "report"},
    "tinymodel": set(), "opcheck": set(), "nightly": {"config"},
}
IMPORT = re.compile(r"^\s*(?:from|import) harness\.(\w+)", re.M)


def test_every_stage_imports_only_what_its_init_allows():
    package = REPO_ROOT / "harness"
    assert {p.name for p in package.iterdir() if (p / "__init__.py").is_file()} == set(ALLOWED)
    upward = [f"{path.relative_to(REPO_ROOT)} imports harness.{dep}"
              for stage, allowed in ALLOWED.items() for path in sorted((package / stage).rglob("*.py"))
              for dep in IMPORT.findall(path.read_text()) if dep not in allowed | {stage}]
    assert upward == []


def test_each_stage_says_in_one_line_what_it_does_and_may_import():
    for stage in ALLOWED:
        first = (REPO_ROOT / "harness" / stage / "__init__.py").read_text().splitlines()[0]
        assert first.startswith('"""') and first.endswith('"""') and "Imports:" in first, stage
