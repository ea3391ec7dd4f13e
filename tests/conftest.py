"""Shared helpers for the harness's own tests."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from pathlib import Path

import pytest

from harness.config.arms import WorkloadChoice
from harness.config.paths import REPO_ROOT

# Every qualify a test runs appends to one history store of this test session (both xdist workers share the run's
# uid), never to the repository's reports/history.sqlite.
os.environ.setdefault("HARNESS_HISTORY", str(Path(tempfile.gettempdir()) / "dcp-harness-test-history-{}.sqlite".format(
    os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.getpid())))

TINY_MODEL = REPO_ROOT / "models" / "tiny-llama"
CPU_WORKLOADS = {"long_prefix": "long_prefix_cpu", "gsm8k": "gsm8k_cpu", "reference_checks": "reference_checks_cpu",
                 "spec_decode": "spec_decode_cpu", "long_context": "long_context_cpu", "ruler": "ruler_cpu",
                 "capacity": "capacity_cpu", "output_coverage": "output_coverage_cpu",
                 "concurrent_prefills": "concurrent_prefills_cpu"}


@pytest.fixture
def arms_dir(tmp_path: Path):
    """A scratch configs/arms with a tiny local model; returns (dir, write(name, yaml_text))."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(
        {"num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
         "qk_rope_head_dim": 64, "max_position_embeddings": 8192}))
    d = tmp_path / "arms"
    d.mkdir()

    def write(name: str, text: str) -> Path:
        path = d / f"{name}.yaml"
        path.write_text(textwrap.dedent(text).replace("MODEL_DIR", str(model)))
        return path

    # The CPU workloads, which fit max_model_len 4096: `plan` checks every suite's workload, as a `qualify` of all
    # suites does (a family this schema does not know yet is left out).
    chosen = {k: v for k, v in CPU_WORKLOADS.items() if k in WorkloadChoice.model_fields}
    write("base", f"""
        model: {{path: MODEL_DIR, served_name: m, max_model_len: 4096}}
        parallelism: {{tp: 8}}
        workloads: {json.dumps(chosen)}
    """)
    return d, write


# Under CI=true a skip not on tests/ci_allowed_skips.yaml fails the run (tests/ci_skips.py).
from ci_skips import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport  # noqa: E402,F401


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the kinds checked are those that run
def pytest_collection_modifyitems(config, items):
    """The session's order (tests/xdist_groups.py order_key); the e2e marker and the e2e modules' names agree (the
    scheduler sees node ids only); `make test`'s session (--dist loadgroup) runs unit and e2e tests both, so a
    selection that lost either kind fails as a session without tests does."""
    from xdist_groups import E2E_MODULE, astray, missing_kind, order_key

    wrong = astray([(i.nodeid, i.get_closest_marker("e2e") is not None) for i in items])
    if wrong:
        raise pytest.UsageError(f"the e2e marker belongs on exactly the tests of {E2E_MODULE}*.py: {', '.join(wrong)}")
    lacking = missing_kind([i.nodeid for i in items]) if config.getvalue("dist") == "loadgroup" else None
    if lacking:
        raise pytest.UsageError(f"make test's session (--dist loadgroup) selected no {lacking} tests")
    items.sort(key=lambda i: order_key(i.nodeid, bool(i.get_closest_marker("stops_shared_server"))))


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` (make test's session): whole e2e groups per worker (tests/xdist_groups.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist_groups import GroupScheduling

    return GroupScheduling(config, log)
