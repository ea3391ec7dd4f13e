"""One model everywhere (issue 56 item 1): every local model a GPU arm serves (tiny-mla; tiny-mla-mtp and the draft
tiny-llama of the speculative arms) is pinned in configs/models/ by the sha256 of its files, a draft with its target's
tokenizer; the device's check (harness.tinymodel.pin check, run by device_lib.sh keep_model) passes the carried files
and refuses any other model (a GPU-generated one, a changed byte, a missing file) with one line and exit 3; the
device's bf16 verify refuses a model whose retrieval or top-2 gap falls short."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from harness.config.arms import ARMS_DIR, load_arm
from harness.config.paths import REPO_ROOT
from harness.tinymodel.pin import PIN_DIR, PINNED_FILES, check, pin_problems, write_pin
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


@pytest.mark.parametrize("name, arch", [("tiny-mla", "deepseek_v3"), ("tiny-mla-mtp", "deepseek_v3_mtp"),
                                        ("tiny-llama", "llama")])
def test_the_repository_pins_each_model_it_carries(name, arch):
    pin = yaml.safe_load((PIN_DIR / f"{name}.yaml").read_text())
    assert pin["name"] == name and pin["inputs"]["arch"] == arch and f"--arch {arch} " in pin["generate"]
    assert set(pin["files"]) == set(PINNED_FILES) and all(len(v) == 64 for v in pin["files"].values())
    assert pin["inputs"]["trained_on"] == "cpu" and pin["quality"]["median_top_gap"] >= 0.2
    if arch != "deepseek_v3_mtp":  # the MTP model has no retrieval circuit
        assert pin["quality"]["retrieval_min"] >= 0.9


def arm_pin_problems(names, pin_dir) -> list[str]:
    """What would stop a device call at keep_model or vLLM's draft_model at start: a local model a GPU arm serves
    without a pin, a draft whose pinned tokenizer.json is not its target's."""
    out = []
    for name in names:
        arm = load_arm(name, geometry=False)
        draft = arm.speculative.model if arm.speculative else None
        pins = {}
        for path in (arm.model.path, draft):
            if arm.device != "gpu" or not (path or "").startswith("models/"):
                continue
            pin = pin_dir / f"{path.removeprefix('models/')}.yaml"
            if pin.is_file():
                pins[path] = yaml.safe_load(pin.read_text())["files"]
            else:
                out.append(f"{name}: {path} has no pin {pin.name}")
        if draft in pins and arm.model.path in pins \
                and pins[draft]["tokenizer.json"] != pins[arm.model.path]["tokenizer.json"]:
            out.append(f"{name}: draft {draft}'s tokenizer.json is not {arm.model.path}'s")
    return out


def test_every_gpu_arm_serves_pinned_models_and_each_draft_its_targets_tokenizer(tmp_path):
    names = sorted(p.stem for p in ARMS_DIR.glob("*.yaml"))
    assert arm_pin_problems(names, PIN_DIR) == []
    pins = tmp_path / "pins"
    shutil.copytree(PIN_DIR, pins)
    llama = yaml.safe_load((pins / "tiny-llama.yaml").read_text())
    llama["files"]["tokenizer.json"] = "0" * 64  # a draft trained with another tokenizer
    (pins / "tiny-llama.yaml").write_text(yaml.safe_dump(llama))
    assert arm_pin_problems(["gpu-draft", "gpu-mla"], pins) == [
        "gpu-draft: draft models/tiny-llama's tokenizer.json is not models/tiny-mla's"]
    (pins / "tiny-mla-mtp.yaml").unlink()
    assert arm_pin_problems(["gpu-mtp", "cpu-smoke"], pins) == [
        "gpu-mtp: models/tiny-mla-mtp has no pin tiny-mla-mtp.yaml"]


def test_verify_refuses_short_retrieval_or_a_flat_distribution():
    assert verdict({"1000": 1.0, "122000": 0.95}, 3.0) == []
    assert verdict({"1000": 1.0, "65536": 0.006}, 3.0) == ["retrieval below 0.9 at {'65536': 0.006}"]
    assert verdict({"1000": 1.0}, 0.1) == ["median top-1/top-2 gap 0.100 < 0.2"]
    assert "no retrieval measured" in verdict({}, 3.0)[0]
    assert ordinary_ids({"needle_tokens": [6, 7]}, 10, {0, 2}) == [1, 3, 4, 5]
