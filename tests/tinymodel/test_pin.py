"""One model everywhere (issue 56 item 1): the GPU arms' tiny MLA model is pinned in configs/models/ by the sha256 of
its files; the device's check (harness.tinymodel.pin check, run by device_lib.sh keep_model) passes the carried files
and refuses any other model (a GPU-generated one, a changed byte, a missing file) with one line and exit 3; the
device's bf16 verify refuses a model whose retrieval or top-2 gap falls short."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from harness.config.paths import REPO_ROOT
from harness.tinymodel.pin import PINNED_FILES, check, pin_problems, write_pin
from harness.tinymodel.verify import ordinary_ids, verdict


@pytest.fixture
def model(tmp_path):
    d = tmp_path / "tiny-mla"
    d.mkdir()
    for i, name in enumerate(PINNED_FILES):
        (d / name).write_bytes(bytes([i]) * 1000)
    (d / "tiny_model.json").write_text(json.dumps({"arch": "deepseek_v3", "weights_sha256": "ab" * 32, "seed": 1234,
                                                   "quality": {"retrieval_min": 1.0}}))
    return d


def test_the_pinned_files_pass_and_a_changed_byte_or_a_missing_file_is_refused(model, tmp_path):
    pins = tmp_path / "pins"
    write_pin(model, "tiny-mla", pins)
    pin = yaml.safe_load((pins / "tiny-mla.yaml").read_text())
    assert pin["weights_sha256"] == "ab" * 32 and set(pin["files"]) == set(PINNED_FILES)
    assert check(model, "tiny-mla", pins) == (0, f"model tiny-mla: pinned, weights {'ab' * 8} (tiny-mla.yaml)")
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x07")  # what a GPU-trained model is: other bytes
    code, line = check(model, "tiny-mla", pins)
    assert code == 3 and "model.safetensors sha256" in line and "not the pinned tiny-mla" in line
    (model / "tokenizer.json").unlink()
    assert "tokenizer.json missing" in check(model, "tiny-mla", pins)[1]


def test_no_pin_or_no_model_is_a_usage_error(model, tmp_path):
    assert check(model, "tiny-mla", tmp_path / "none")[0] == 2
    write_pin(model, "tiny-mla", tmp_path / "pins")
    assert check(tmp_path / "absent", "tiny-mla", tmp_path / "pins")[0] == 2
    assert pin_problems({}, {}) == ["the pin lists no files"]


def test_the_check_runs_as_the_device_runs_it(model, tmp_path):
    write_pin(model, "tiny-mla", tmp_path / "pins")
    cmd = [sys.executable, "-m", "harness.tinymodel.pin", "check", str(model), "--name", "tiny-mla", "--pin-dir",
           str(tmp_path / "pins")]
    assert subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True).returncode == 0
    (model / "config.json").write_text("{}")
    bad = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True)
    assert bad.returncode == 3 and len(bad.stderr.strip().splitlines()) == 1


def test_the_repository_pins_the_tiny_mla_it_carries():
    pin = yaml.safe_load((REPO_ROOT / "configs" / "models" / "tiny-mla.yaml").read_text())
    assert set(pin["files"]) == set(PINNED_FILES) and all(len(v) == 64 for v in pin["files"].values())
    assert pin["inputs"]["trained_on"] == "cpu" and pin["quality"]["retrieval_min"] >= 0.9
    assert pin["quality"]["median_top_gap"] >= 0.2


def test_verify_refuses_short_retrieval_or_a_flat_distribution():
    assert verdict({"1000": 1.0, "122000": 0.95}, 3.0) == []
    assert verdict({"1000": 1.0, "65536": 0.006}, 3.0) == ["retrieval below 0.9 at {'65536': 0.006}"]
    assert verdict({"1000": 1.0}, 0.1) == ["median top-1/top-2 gap 0.100 < 0.2"]
    assert "no retrieval measured" in verdict({}, 3.0)[0]
    assert ordinary_ids({"needle_tokens": [6, 7]}, 10, {0, 2}) == [1, 3, 4, 5]
