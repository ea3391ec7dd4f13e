"""scripts/device_lib.sh is the one device library: every device job sources it (or runs a job that does) instead of
repeating the environment, the harness wheel, the reference store and the packing; and its functions do on a CPU
machine what they do on the device (nothing in them needs a GPU but the model generator, not called here)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile

from harness.config.paths import REPO_ROOT

SCRIPTS = REPO_ROOT / "scripts"
LIB = SCRIPTS / "device_lib.sh"
# What the library does once and a job must not do again: its environment and the wheel's install.
REPEATED = {"the NVLink-multicast environment": re.compile(r"^\s*export\s+NCCL_NVLS_ENABLE", re.M),
            "the harness wheel's install": re.compile(r"pip install .*--target .*hsite", re.M),
            "the reference store's restore": re.compile(r"tar xzf \.device-refs/references\.tgz", re.M)}


def repeats_of_the_library(text: str) -> list[str]:
    """What a device job does by hand that the library does (its names); a job that neither sources the library nor
    runs another device job is named too."""
    found = [what for what, pattern in REPEATED.items() if pattern.search(text)]
    if "source scripts/device_lib.sh" not in text and not re.search(r"bash scripts/device_\w+\.sh", text):
        found.append("no `source scripts/device_lib.sh`")
    return found


def test_every_device_job_uses_the_library_and_repeats_none_of_it():
    jobs = sorted(p for p in SCRIPTS.glob("device_*.sh") if p != LIB)
    assert len(jobs) >= 10
    assert {p.name: repeats_of_the_library(p.read_text()) for p in jobs} == {p.name: [] for p in jobs}
    for path in [*jobs, LIB]:
        subprocess.run(["bash", "-n", str(path)], check=True)


def test_a_job_that_sets_up_by_hand_is_named():
    by_hand = ("set -u\nexport NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1\n"
               "python3 -m pip install -q --no-index --target /tmp/hsite x.whl\n")
    assert repeats_of_the_library(by_hand) == ["the NVLink-multicast environment", "the harness wheel's install",
                                               "no `source scripts/device_lib.sh`"]


def run_lib(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = f"set -euo pipefail\nsource {LIB}\n{body}\n"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out"), "HSITE": str(tmp_path / "hsite")}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_the_library_sets_up_keeps_and_packs_on_a_cpu_machine(tmp_path):
    refs = io.BytesIO()
    with tarfile.open(fileobj=refs, mode="w:gz") as tar:
        data = b'{"format": 1}'
        info = tarfile.TarInfo("references/cpu-ref-abc.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / ".device-refs").mkdir()
    (tmp_path / ".device-refs" / "references.tgz").write_bytes(refs.getvalue())
    run = tmp_path / "keep" / "reports" / "r1" / "cand"  # where device_keep points HARNESS_REPORTS_DIR
    run.mkdir(parents=True)
    (run / "server.log").write_text("x" * 400_000 + "last words\n")
    result = run_lib(tmp_path, 'device_start\nREPORT=$OUT/report.txt\ndevice_keep "$PWD/keep"\nsay "kept in $KEEP"\n'
                               'echo log > q.log\npack_run r1 run q.log\nsave_references\n'
                               'echo "nvls=$NCCL_NVLS_ENABLE ref=$HARNESS_REFERENCE_DIR py=$PY"')
    assert result.returncode == 0, result.stderr
    assert f"nvls=0 ref={tmp_path}/keep/references py=python3" in result.stdout
    assert (tmp_path / "keep" / "references" / "cpu-ref-abc.json").read_text() == '{"format": 1}'  # restored
    assert re.match(r"\[\d+s\] kept in .*/keep$", (tmp_path / "out" / "report.txt").read_text().strip())
    with tarfile.open(tmp_path / "out" / "run.tar.gz") as tar:
        names = tar.getnames()
        log = tar.extractfile("r1/cand/server.log").read()
    assert "r1/q.log" in names and len(log) == 150_000 and log.endswith(b"last words\n")  # cut to its tail
    with tarfile.open(tmp_path / "out" / "references.tgz") as tar:
        assert "references/cpu-ref-abc.json" in tar.getnames()
    assert not (tmp_path / "hsite").exists()  # no wheel carried: nothing installed


def carried_model(tmp_path, name: str = "tiny-mla", arch: str = "deepseek_v3"):
    """A stand-in model carried in .device-refs/, with a pin of its files in tmp_path/pins."""
    from harness.tinymodel.pin import PINNED_FILES, write_pin

    d = tmp_path / ".device-refs" / name
    d.mkdir(parents=True)
    for i, f in enumerate(PINNED_FILES):
        (d / f).write_bytes(bytes([i + 1]) * 100)
    (d / "tiny_model.json").write_text('{"arch": "' + arch + '", "weights_sha256": "' + "cd" * 32 + '"}')
    write_pin(d, name, tmp_path / "pins")
    return d


def run_keep_model(tmp_path, keep: str, name: str = "tiny-mla", verify: str = "0") -> subprocess.CompletedProcess:
    script = (f"set -uo pipefail\nsource {LIB}\ndevice_start\ndevice_keep \"$PWD/{keep}\"\n"
              f"keep_model {name}; echo \"exit $?\"; readlink models/{name} || true\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OUT": str(tmp_path / "out"), "HSITE": str(tmp_path / "h"),
           "PY": sys.executable, "MODEL_PIN_DIR": str(tmp_path / "pins"), "VERIFY_MODEL": verify,
           "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)


def test_keep_model_measures_only_the_retrieval_model_on_the_gpu(tmp_path):
    # the draft (llama: a circuit for CPU lengths) and the MTP model (no circuit) are checked against their pins only;
    # the MLA model is measured, which these stand-in bytes cannot pass
    for name, arch in (("tiny-llama", "llama"), ("tiny-mla-mtp", "deepseek_v3_mtp")):
        carried_model(tmp_path, name, arch)
        assert "exit 0" in run_keep_model(tmp_path, "keep", name, verify="1").stdout
        assert not (tmp_path / "keep" / f"{name}.verified").exists()
    carried_model(tmp_path, "tiny-mla", "deepseek_v3")
    assert "exit 3" in run_keep_model(tmp_path, "keep", "tiny-mla", verify="1").stdout


def test_arm_models_names_what_the_arms_and_their_references_serve(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PY": sys.executable, "PYTHONPATH": str(REPO_ROOT)}

    def run(arms: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"source {LIB}; arm_models {arms}"], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, check=False)

    assert run("gpu-mtp gpu-draft-async").stdout.split() == ["tiny-mla-mtp", "tiny-mla", "tiny-llama"]
    assert run("gpu-mla gpu-mla-eager").stdout.split() == ["tiny-mla"]
    bad = run("gpu-mtp no-such-arm")
    assert bad.returncode == 2 and bad.stdout == "" and "unknown arm 'no-such-arm'" in bad.stderr


def test_keep_model_links_the_pinned_carried_model_and_refuses_another(tmp_path):
    carried = carried_model(tmp_path)
    ok = run_keep_model(tmp_path, "keep")
    assert "exit 0" in ok.stdout and ok.stdout.strip().endswith(f"{tmp_path}/keep/tiny-mla"), ok.stderr
    assert "model tiny-mla: pinned, weights cdcdcdcd" in (tmp_path / "out" / "model.txt").read_text()
    weights = carried / "model.safetensors"
    weights.write_bytes(b"\x09" + weights.read_bytes()[1:])  # a model made elsewhere: other bytes
    bad = run_keep_model(tmp_path, "fresh-keep")
    assert "exit 3" in bad.stdout
    refused = [line for line in bad.stderr.splitlines() if "not the pinned" in line]
    assert len(refused) == 1 and "model.safetensors sha256" in refused[0]


def test_keep_model_without_a_carried_model_says_what_to_carry(tmp_path):
    result = run_keep_model(tmp_path, "keep")
    assert "exit 3" in result.stdout and "no .device-refs/tiny-mla" in result.stderr
