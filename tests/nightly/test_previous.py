"""The previous nightly build (the baseline's source) picked from Buildkite's build list."""

import json
import subprocess
import sys

from harness.config.paths import REPO_ROOT
from harness.nightly.previous import previous_nightly

BUILDS = [
    {"id": "b12", "number": 12, "source": "schedule", "state": "running"},  # this build
    {"id": "b11", "number": 11, "source": "ui", "state": "passed"},  # a manual build is not a nightly
    {"id": "b10", "number": 10, "source": "schedule", "state": "canceled"},  # may hold partial records
    {"id": "b9", "number": 9, "source": "schedule", "state": "failed"},  # failed gates still hold valid records
    {"id": "b8", "number": 8, "source": "schedule", "state": "passed"},
]


def test_newest_finished_scheduled_build_before_this_one():
    assert previous_nightly(BUILDS, 12)["id"] == "b9"
    assert previous_nightly(BUILDS, 9)["id"] == "b8"
    assert previous_nightly(BUILDS, 8) is None and previous_nightly([], 5) is None


def test_module_prints_id_and_number_or_nothing():
    run = [sys.executable, "-m", "harness.nightly.previous"]
    out = subprocess.run([*run, "12"], input=json.dumps(BUILDS), capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.returncode == 0 and out.stdout == "b9 9\n"
    out = subprocess.run([*run, "8"], input=json.dumps(BUILDS), capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.returncode == 0 and out.stdout == ""


def test_all_prints_every_earlier_nightly_newest_first_at_most_ten():
    # where the step looks for the history store: a night whose fetch failed uploaded none (issue 47)
    run = [sys.executable, "-m", "harness.nightly.previous", "--all"]
    out = subprocess.run([*run, "12"], input=json.dumps(BUILDS), capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.returncode == 0 and out.stdout == "b9 9\nb8 8\n"
    many = [{"id": f"b{n}", "number": n, "source": "schedule", "state": "passed"} for n in range(1, 30)]
    out = subprocess.run([*run, "25"], input=json.dumps(many), capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.stdout.splitlines() == [f"b{n} {n}" for n in range(24, 14, -1)]
    out = subprocess.run([*run, "8"], input=json.dumps(BUILDS), capture_output=True, text=True, cwd=REPO_ROOT)
    assert out.returncode == 0 and out.stdout == ""
