"""The pinned tiny models (configs/models/<name>.yaml): which files, with which sha256, a GPU arm's model must be, and
what made them. The GPU models are generated once on CPU (deterministic) and carried to every device, so an H100 and
an H200 serve the same weights and share references and calibrations; the device checks the carried files against
the pin before a run (scripts/device_lib.sh keep_model) and stops on a mismatch with one message.

    python -m harness.tinymodel.pin write models/tiny-mla --name tiny-mla     # after generating: record the pin
    python -m harness.tinymodel.pin check models/tiny-mla --name tiny-mla     # exit 0, or 3 with why

Standard library and PyYAML only (no torch): the device checks before anything is imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

PIN_DIR = Path(__file__).resolve().parents[2] / "configs" / "models"
# The files whose bytes are the model as served: weights, geometry, tokenizer. tiny_model.json is left out (it holds
# the generation's timings, which differ from run to run).
PINNED_FILES = ("model.safetensors", "config.json", "tokenizer.json")
GENERATOR = Path(__file__).resolve().parent
# The generator's sources that determine the weights (not this file, verify.py or other tools kept beside them).
GENERATOR_FILES = ("generate.py", "circuit.py", "circuit_mla.py", "copytask.py", "mtp.py", "needles.py", "probe.py",
                   "retrieval.py", "ropekernel.py")


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_hashes(model_dir: Path) -> dict[str, str | None]:
    """{file: sha256} of PINNED_FILES in model_dir (None: the file is missing)."""
    return {f: sha256_file(model_dir / f) if (model_dir / f).is_file() else None for f in PINNED_FILES}


def generator_hash() -> str:
    """sha256 over the generator's sources (GENERATOR_FILES, name and bytes): the code that determines the weights,
    besides the inputs the pin lists."""
    h = hashlib.sha256()
    for name in GENERATOR_FILES:
        h.update(name.encode() + b"|" + (GENERATOR / name).read_bytes())
    return h.hexdigest()


def pin_record(name: str, summary: dict, files: dict[str, str | None], command: str) -> dict:
    """The pin of a generated model (pure): its file hashes, weights hash and quality, and the inputs that determine
    it (seed, plan, torch, threads, the GSM8K file's hash, the generator's sources)."""
    return {"name": name, "generate": command, "files": files,
            "weights_sha256": summary.get("weights_sha256"), "quality": summary.get("quality"),
            "inputs": {"arch": summary.get("arch"), "trained_on": summary.get("trained_on"), "seed": summary.get("seed"),
                       "plan": summary.get("plan"), "torch": summary.get("torch"),
                       "threads": summary.get("threads"), "gsm8k_train_sha256": summary.get("source_sha256"),
                       "generator_sha256": summary.get("generator_sha256")}}


def pin_problems(pin: dict, files: dict[str, str | None]) -> list[str]:
    """Why the files are not the pinned model (pure; empty: they are)."""
    out = []
    for f, want in (pin.get("files") or {}).items():
        got = files.get(f)
        if got is None:
            out.append(f"{f} missing")
        elif got != want:
            out.append(f"{f} sha256 {got[:12]}... != pinned {str(want)[:12]}...")
    if not pin.get("files"):
        out.append("the pin lists no files")
    return out


def pin_path(name: str, pin_dir: Path = PIN_DIR) -> Path:
    return pin_dir / f"{name}.yaml"


def write_pin(model_dir: Path, name: str, pin_dir: Path = PIN_DIR) -> Path:
    summary = json.loads((model_dir / "tiny_model.json").read_text())
    command = f"python -m harness make-tiny-model --arch {summary.get('arch')} --device cpu --out models/{name}"
    record = pin_record(name, summary, file_hashes(model_dir), command)
    import yaml  # here, not at the top: the generator imports this module, and yaml is not needed to generate

    path = pin_path(name, pin_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = (f"# The pinned {name}: generated on CPU by `{command}` (then `python -m harness.tinymodel.pin write "
            f"models/{name} --name {name}`);\n# checked on the device before every run (scripts/device_lib.sh "
            "keep_model). Regenerating with the inputs below gives these files.\n")
    path.write_text(head + yaml.safe_dump(record, sort_keys=False, width=120))
    return path


def check(model_dir: Path, name: str, pin_dir: Path = PIN_DIR) -> tuple[int, str]:
    """(exit code, one line): 0 the files are the pin's; 2 no pin or no model dir; 3 the files differ."""
    path = pin_path(name, pin_dir)
    if not path.is_file():
        return 2, f"error: no pin {path} for model {name}: generate it on CPU and write the pin (harness.tinymodel.pin)"
    if not model_dir.is_dir():
        return 2, f"error: model dir {model_dir} not found: carry the CPU-generated {name} (.device-refs/{name})"
    import yaml

    pin = yaml.safe_load(path.read_text()) or {}
    problems = pin_problems(pin, file_hashes(model_dir))
    if problems:
        return 3, (f"error: {model_dir} is not the pinned {name} ({path}): {'; '.join(problems)}; carry the "
                   "CPU-generated model, do not generate one on this machine")
    return 0, f"model {name}: pinned, weights {str(pin.get('weights_sha256'))[:16]} ({path.name})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["write", "check"])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--name", required=True, help="the pin's name: configs/models/<name>.yaml")
    parser.add_argument("--pin-dir", type=Path, default=PIN_DIR)
    args = parser.parse_args(argv)
    if args.action == "write":
        if not (args.model_dir / "tiny_model.json").is_file():
            print(f"error: {args.model_dir}/tiny_model.json not found: generate the model first", file=sys.stderr)
            return 2
        print(write_pin(args.model_dir, args.name, args.pin_dir))
        return 0
    code, line = check(args.model_dir, args.name, args.pin_dir)
    print(line, file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
