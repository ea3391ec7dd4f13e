"""The nightly step's history store (issue 47, item 5): scripts/buildkite/qualify_step.sh, run for real on a copy of
the checkout's layout, with `buildkite-agent` and the harness's interpreter as stand-ins that log their calls (the
agent serves artifacts from a folder; qualify writes an annotation and appends to the store; `history check` passes).
A store neither here nor fetched fails the step before qualify and says so in the annotation; an explicit reset (the
first night) starts one, its reason in the annotation, but only where no store can be fetched (the fetch is always
tried first); a fetched store is what qualify appends to; a missing shared store (`pipeline --history PATH`) is named
as such, never as a failed download."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from harness.config.paths import REPO_ROOT
from harness.nightly.pipeline import STEP_SCRIPT

GROUP = "cpu-smoke"
STORE = f"reports/history-{GROUP}.sqlite"
AGENT = """#!/bin/sh
# buildkite-agent: artifact download PATH DEST --build ID from $ARTIFACTS/ID/PATH; annotate: body from argv or stdin
echo "buildkite-agent $*" >> "$CALLS"
case "$1 $2" in
  "artifact download") [ -f "$ARTIFACTS/$6/$3" ] || { echo "no artifacts found for $3" >&2; exit 1; }
                       mkdir -p "$(dirname "$4/$3")" && cp "$ARTIFACTS/$6/$3" "$4/$3" ;;
  "annotate "*) { [ $# -gt 5 ] && echo "$6" || cat; } >> "$ANNOTATIONS" ;;
esac
"""
PYTHON = """#!/bin/sh
# the harness's interpreter: qualify writes the run's annotation and appends a line to the store; check passes
echo "python $*" >> "$CALLS"
case "$*" in
  *"harness.nightly.previous"*) PYTHONPATH="$REPO_ROOT" exec "$REAL_PYTHON" "$@" ;;  # the real pick of builds
  *"harness qualify"*) [ -f "$HARNESS_HISTORY" ] && echo "store before qualify: $(cat "$HARNESS_HISTORY")" >> "$CALLS"
                       mkdir -p "reports/$HARNESS_RUN_ID" && echo "## $HARNESS_RUN_ID: PASSED" \\
                         > "reports/$HARNESS_RUN_ID/annotation.md"
                       echo "$HARNESS_RUN_ID" >> "$HARNESS_HISTORY" ;;
  *"history check"*) echo "history check of $HARNESS_RUN_ID: ${CHECK_SAYS:-PASS}"; exit "${CHECK_EXIT:-0}" ;;
esac
"""
CURL = """#!/bin/sh
# curl of Buildkite's REST build list: the JSON in $BUILDS
echo "curl $*" >> "$CALLS"
cat "$BUILDS"
"""


@pytest.fixture
def step(tmp_path):
    """Runs the step script from a copy under tmp_path (it works in its checkout's root: here tmp_path/checkout) with
    the nightly env of build 42; returns (result, calls, annotations)."""
    root = tmp_path / "checkout"
    (root / STEP_SCRIPT).parent.mkdir(parents=True)
    shutil.copy(REPO_ROOT / STEP_SCRIPT, root / STEP_SCRIPT)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("buildkite-agent", AGENT), ("python", PYTHON), ("curl", CURL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    calls, annotations = tmp_path / "calls.log", tmp_path / "annotations.md"

    def run(**env: str) -> tuple[subprocess.CompletedProcess, str, str]:
        full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "CALLS": str(calls),
                "ANNOTATIONS": str(annotations), "ARTIFACTS": str(tmp_path / "artifacts"),
                "HARNESS_PYTHON": str(bin_dir / "python"), "HARNESS_RUN_ID": f"nightly-42-{GROUP}",
                "HARNESS_ARMS": GROUP, "CI": "true", "HARNESS_BASELINE_FROM": "previous-nightly",
                "HARNESS_HISTORY_CHECK": "1", "HARNESS_HISTORY": STORE, "REPO_ROOT": str(REPO_ROOT),
                "REAL_PYTHON": sys.executable, "BUILDS": str(tmp_path / "builds.json"), **env}
        out = subprocess.run(["bash", str(root / STEP_SCRIPT)], cwd=tmp_path, env=full, capture_output=True,
                             text=True, timeout=60)
        return (out, calls.read_text() if calls.exists() else "",
                annotations.read_text() if annotations.exists() else "")

    def artifact(build: str, path: str, text: str) -> None:
        (tmp_path / "artifacts" / build / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "artifacts" / build / path).write_text(text)

    run.root, run.artifact = root, artifact
    return run


PREVIOUS = {"NIGHTLY_BASELINE_BUILD": "b41", "NIGHTLY_BASELINE_NUMBER": "41"}
API = {"BUILDKITE_API_TOKEN": "t", "BUILDKITE_ORGANIZATION_SLUG": "org", "BUILDKITE_PIPELINE_SLUG": "dcp",
       "BUILDKITE_BRANCH": "main", "BUILDKITE_BUILD_NUMBER": "42"}


def api_builds(tmp_path) -> None:
    """Buildkite's build list: nightlies 41 and 40 failed (no store uploaded), 39 passed; 38 was a manual build."""
    builds = [{"id": "b42", "number": 42, "source": "schedule", "state": "running"},
              {"id": "b41", "number": 41, "source": "schedule", "state": "failed"},
              {"id": "b40", "number": 40, "source": "schedule", "state": "failed"},
              {"id": "b39", "number": 39, "source": "schedule", "state": "passed"},
              {"id": "b38", "number": 38, "source": "ui", "state": "passed"}]
    (tmp_path / "builds.json").write_text(json.dumps(builds))


def test_a_store_missing_from_the_previous_nightly_is_fetched_from_the_newest_one_that_has_it(step, tmp_path):
    # a night whose fetch failed uploads no store: without looking further back every later night would fail too
    api_builds(tmp_path)
    step.artifact("b38", STORE, "manual\n")  # not a nightly: never a candidate
    step.artifact("b39", STORE, "night-38\nnight-39\n")
    out, calls, annotations = step(**API)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "harness.nightly.previous --all 42" in calls
    assert "artifact download reports/nightly-41-cpu-smoke/results.jsonl baseline/ --build b41" in calls
    assert [f"--build {b}" in calls for b in ("b41", "b40", "b39", "b38")] == [True, True, True, False]
    assert (step.root / STORE).read_text().split() == ["night-38", "night-39", "nightly-42-cpu-smoke"]
    assert "Nightly history store fetched from build 39: builds 41..40 had none." in annotations


def test_no_earlier_nightly_with_a_store_fails_the_step_naming_the_builds_tried(step, tmp_path):
    api_builds(tmp_path)
    out, calls, annotations = step(**API)
    assert out.returncode != 0 and "harness qualify" not in calls
    assert "--build b39" in calls and "--build b38" not in calls
    assert (f"Nightly history not fetched: {STORE} is not here and the previous nightly's artifact (build 41) could "
            "not be downloaded, nor that of the earlier nightlies (builds 41..39 had none)") in annotations


def test_a_previous_store_that_cannot_be_fetched_fails_the_step_before_qualify_and_says_so(step):
    out, calls, annotations = step(**PREVIOUS)  # build 41 has no artifacts at all
    assert out.returncode != 0, out.stdout + out.stderr
    assert f"buildkite-agent artifact download {STORE} . --build b41" in calls
    assert "harness qualify" not in calls and "history check" not in calls
    assert "annotate --context qualify-cpu-smoke --style error" in calls
    assert f"Nightly history not fetched: {STORE} is not here" in annotations
    assert "(build 41) could not be downloaded" in annotations and "HARNESS_HISTORY_RESET=<reason>" in annotations
    assert not (step.root / STORE).exists()


def test_no_previous_nightly_to_fetch_from_fails_the_step_too(step):
    out, calls, annotations = step()
    assert out.returncode != 0 and "harness qualify" not in calls
    assert "no previous nightly build was found to fetch it from" in annotations


def test_a_download_that_leaves_no_file_is_a_failed_fetch(step, tmp_path):
    agent = tmp_path / "bin" / "buildkite-agent"
    agent.write_text(agent.read_text().replace('&& cp "$ARTIFACTS/$6/$3" "$4/$3"', "&& true"))
    step.artifact("b41", STORE, "night-41\n")
    out, calls, annotations = step(**PREVIOUS)
    assert out.returncode != 0 and "harness qualify" not in calls and "not fetched" in annotations


def test_the_first_night_is_an_explicit_reset_whose_reason_the_annotation_gives(step):
    out, calls, annotations = step(HARNESS_HISTORY_RESET="first nightly of the DCP harness")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "artifact download" not in calls
    assert "harness qualify --arms cpu-smoke" in calls and "history check --run nightly-42-cpu-smoke" in calls
    assert "History reset (HARNESS_HISTORY_RESET): first nightly of the DCP harness." in annotations
    assert "history check of nightly-42-cpu-smoke: PASS" in annotations
    assert (step.root / STORE).read_text() == "nightly-42-cpu-smoke\n"


def test_a_fetched_store_is_the_one_qualify_appends_to(step):
    step.artifact("b41", STORE, "night-40\nnight-41\n")
    out, calls, annotations = step(**PREVIOUS)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "store before qualify: night-40 night-41" in calls.replace("\n", " ")
    assert "History reset" not in annotations and "not fetched" not in annotations
    assert (step.root / STORE).read_text().split() == ["night-40", "night-41", "nightly-42-cpu-smoke"]


def test_a_reset_still_fetches_the_previous_store_and_continues_it(step):
    # `--history-reset` is per build: a group whose store can be fetched keeps its history
    step.artifact("b41", STORE, "night-40\nnight-41\n")
    out, calls, annotations = step(**PREVIOUS, HARNESS_HISTORY_RESET="lost the store of another group")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"buildkite-agent artifact download {STORE} . --build b41" in calls
    assert (step.root / STORE).read_text().split() == ["night-40", "night-41", "nightly-42-cpu-smoke"]
    assert ("HARNESS_HISTORY_RESET is set (lost the store of another group) but the previous nightly's store "
            "(build 41) was fetched: nothing was reset") in annotations
    assert "History reset" not in annotations


def test_a_reset_starts_anew_only_after_the_fetch_failed_and_says_so(step):
    out, calls, annotations = step(**PREVIOUS, HARNESS_HISTORY_RESET="store lost")  # build 41 has no store
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"buildkite-agent artifact download {STORE} . --build b41" in calls
    assert (f"History reset (HARNESS_HISTORY_RESET): store lost. Nothing to continue: {STORE} is not here and the "
            "previous nightly's artifact (build 41) could not be downloaded. This night starts a new store") in annotations
    assert (step.root / STORE).read_text() == "nightly-42-cpu-smoke\n"


def test_a_missing_shared_store_is_named_never_a_failed_download(step, tmp_path):
    shared = tmp_path / "mnt" / "history.sqlite"  # a filesystem every agent reaches, not mounted tonight
    out, calls, annotations = step(**PREVIOUS, HARNESS_HISTORY=str(shared))
    assert out.returncode != 0 and "harness qualify" not in calls and f"artifact download {shared}" not in calls
    assert f"Nightly history not found: the shared store {shared} (pipeline --history) is not there (an unmounted " \
           "filesystem?)" in annotations
    assert "could not be downloaded" not in annotations and "Mount the filesystem" in annotations
    shared.parent.mkdir()  # mounted, empty: a reset starts the store there
    out, calls, annotations = step(**PREVIOUS, HARNESS_HISTORY=str(shared), HARNESS_HISTORY_RESET="new shared path")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "History reset (HARNESS_HISTORY_RESET): new shared path. Nothing to continue: the shared store" in annotations
    assert shared.read_text() == "nightly-42-cpu-smoke\n" and f"artifact download {shared}" not in calls


def test_a_reset_never_touches_a_store_that_is_here(step):
    shared = step.root / "shared.sqlite"
    shared.write_text("night-41\n")
    out, calls, annotations = step(HARNESS_HISTORY=str(shared), HARNESS_HISTORY_RESET="why not")
    assert out.returncode == 0 and "artifact download" not in calls
    assert shared.read_text().split() == ["night-41", "nightly-42-cpu-smoke"]
    assert "nothing was reset" in annotations


@pytest.mark.parametrize("says, code, style, step_code", [
    ("NOT JUDGED (not enough history: cpu-smoke check.x: 3 of 6 runs)", 3, "warning", 0),
    ("FAIL (1 lasting change(s) at budget 1%)", 1, "error", 1)])
def test_a_check_that_cannot_judge_is_a_warning_and_one_that_fails_fails_the_step(step, says, code, style, step_code):
    step.artifact("b41", STORE, "night-41\n")
    out, calls, annotations = step(**PREVIOUS, CHECK_SAYS=says, CHECK_EXIT=str(code))
    assert out.returncode == step_code, out.stdout + out.stderr
    assert f"annotate --context qualify-cpu-smoke --style {style}" in calls
    assert f"history check of nightly-42-cpu-smoke: {says}" in annotations


def emit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", "pipeline", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)


def test_the_pipeline_passes_a_reset_to_every_nightly_step_for_one_build():
    out = emit("--arms", "dcp8,cpu-smoke", "--nightly", "--history-reset", "store lost: disk of agent 3 ($HOST)")
    assert out.returncode == 0, out.stderr
    steps = yaml.safe_load(out.stdout)["steps"]
    assert [s["env"]["HARNESS_HISTORY_RESET"] for s in steps] == ["store lost: disk of agent 3 ($$HOST)"] * 2
    assert all("HARNESS_HISTORY_RESET" not in s["env"] for s in yaml.safe_load(
        emit("--arms", "dcp8", "--nightly").stdout)["steps"])


@pytest.mark.parametrize("args, needle", [(["--history-reset", "x"], "only a --nightly pipeline keeps a history"),
                                          (["--nightly", "--history-reset", " "], "give the reason")])
def test_a_reset_without_a_nightly_or_a_reason_is_refused(args, needle):
    out = emit("--arms", "dcp8", *args)
    assert out.returncode == 2 and needle in out.stderr and "--history-reset" in out.stderr and not out.stdout
