"""Which build an arm's server imports (harness/plan/build.py): the vllm package its interpreter finds with the arm's
own environment, hashed by content -- a planted fault in a PYTHONPATH scratch copy is another build, the same files
written again are the same build, and the cache answers an unchanged package without reading it."""

from __future__ import annotations

import sys

from harness.config.arms import load_arm
from harness.plan import build


def fake_vllm(root, marker: str = "clean"):
    pkg = root / "vllm"
    (pkg / "attention").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("__version__ = 'fake'\n")
    (pkg / "attention" / "ops.py").write_text(f"def attend():\n    return '{marker}'\n")
    (pkg / "__pycache__").mkdir(exist_ok=True)
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"written on import")
    return pkg


def arm_on(scratch):
    """cpu-smoke on this interpreter, importing the vllm found first on its PYTHONPATH (the planted-fault arms'
    way: harness/faults/length_faults/ arm_yaml)."""
    arm = load_arm("cpu-smoke")
    return arm.model_copy(update={
        "launcher": arm.launcher.model_copy(update={"python": sys.executable}),
        "server": arm.server.model_copy(update={"env": {**arm.server.env, "PYTHONPATH": str(scratch)}})})


def test_a_planted_fault_in_a_scratch_copy_is_another_build(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    fake_vllm(tmp_path / "clean")
    clean = build.arm_build(arm_on(tmp_path / "clean"))
    assert clean.where == str(tmp_path / "clean" / "vllm") and clean.build_hash and len(clean.build_hash) == 16
    fake_vllm(tmp_path / "faulty", marker="faulty")
    faulty = build.arm_build(arm_on(tmp_path / "faulty"))
    assert faulty.build_hash != clean.build_hash
    # the vllm files alone, what a confirmation compares (harness/calibrate/trust.py): the planted file moves it too
    assert clean.package_hash == build.package_hash(tmp_path / "clean" / "vllm") != faulty.package_hash
    assert clean.as_dict()["package_hash"] == clean.package_hash
    fake_vllm(tmp_path / "again")  # the same files, written anew (other times): the same build
    assert build.arm_build(arm_on(tmp_path / "again")).build_hash == clean.build_hash
    (tmp_path / "clean" / "vllm" / "__pycache__" / "y.pyc").write_bytes(b"another import")
    assert build.arm_build(arm_on(tmp_path / "clean")).build_hash == clean.build_hash  # bytecode is no build


def test_the_cache_answers_an_unchanged_package_and_a_changed_file_is_hashed_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    pkg = fake_vllm(tmp_path / "site")
    first = build.package_hash(pkg)
    read = []
    monkeypatch.setattr(build, "content_hash", lambda root, files: read.append(root) or "hashed-again")
    assert build.package_hash(pkg) == first and read == []  # from the cache
    (pkg / "attention" / "ops.py").write_text("def attend():\n    return 'patched'\n")
    assert build.package_hash(pkg) == "hashed-again" and read == [pkg]


def test_an_interpreter_without_vllm_gives_no_build_hash(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    got = build.arm_build(arm_on(empty))
    assert got.build_hash is None and got.where is None


def test_a_torch_or_triton_upgrade_under_the_same_vllm_is_another_build():
    same = build.build_hash("abc", {"torch": "2.11.0", "triton": "3.5.0"})
    assert same == build.build_hash("abc", {"triton": "3.5.0", "torch": "2.11.0"})  # order-free
    assert same != build.build_hash("abc", {"torch": "2.12.0", "triton": "3.5.0"})
    assert same != build.build_hash("abd", {"torch": "2.11.0", "triton": "3.5.0"})


def test_the_stack_versions_are_read_in_the_servers_interpreter(tmp_path, monkeypatch):
    """The same scratch vllm with this interpreter's stack: the hash folds in what that interpreter has installed."""
    import importlib.metadata as m

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    fake_vllm(tmp_path / "clean")
    found = build.arm_build(arm_on(tmp_path / "clean"))
    stack = {}
    for name in build.STACK:
        try:
            stack[name] = m.version(name)
        except m.PackageNotFoundError:
            pass
    assert found.build_hash == build.build_hash(build.package_hash(tmp_path / "clean" / "vllm"), stack)


def test_a_scratch_copy_that_links_a_whole_directory_hashes_its_files(tmp_path, monkeypatch):
    """A scratch copy links the directories it leaves unpatched (harness/faults/length_faults/scratch.py): their files
    are the package's too, so the copy hashes as the package it mirrors, and a change under a linked directory moves
    its hash."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    pkg = fake_vllm(tmp_path / "clean")
    mirror = tmp_path / "scratch" / "vllm"
    mirror.mkdir(parents=True)
    (mirror / "__init__.py").symlink_to(pkg / "__init__.py")
    (mirror / "attention").symlink_to(pkg / "attention")
    assert build.package_hash(mirror) == build.package_hash(pkg)
    before = build.package_hash(mirror)
    (pkg / "attention" / "ops.py").write_text("def attend():\n    return 'changed'\n")
    assert build.package_hash(mirror) != before
