"""Arms: one typed model per YAML document in configs/arms/.

The loader resolves `extends:` (deep merge, child wins, lists replaced), applies
command-line `--set path=value` overrides, validates strictly (unknown keys are
errors), and fills the model geometry from the model's config.json where the
model is local. Every failure is a ConfigError naming the file and field.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.config.errors import ConfigError
from harness.config.files import deep_merge, field_errors, read_yaml
from harness.config.paths import ARMS_DIR, REPO_ROOT

ARM_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")

# "auto" leaves the variable unset so vLLM decides; "force" sets 1; "off" sets 0.
Switch = Literal["auto", "force", "off"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Geometry(Strict):
    """What preflight needs to know about the model; from config.json or inline."""

    num_attention_heads: int | None = Field(None, ge=1)
    num_key_value_heads: int | None = Field(None, ge=1)
    kv_lora_rank: int | None = Field(None, ge=1)  # set only for MLA models
    qk_rope_head_dim: int | None = Field(None, ge=0)
    max_position_embeddings: int | None = Field(None, ge=1)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None


class ModelSpec(Strict):
    path: str  # local directory (relative to the repo root) or a hub id
    source: Literal["local", "hub"] = "local"
    served_name: str
    max_model_len: int = Field(ge=1)
    dtype: str | None = None
    config_json: str | None = None  # where to read geometry; default <path>/config.json
    geometry: Geometry = Geometry()

    def local_dir(self) -> Path:
        p = Path(self.path).expanduser()
        return p if p.is_absolute() else REPO_ROOT / p


class Parallelism(Strict):
    tp: int = Field(1, ge=1)
    dcp: int = Field(1, ge=1)
    pcp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    nnodes: int = Field(1, ge=1)
    cp_kv_cache_interleave_size: int = Field(1, ge=1)

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
    method: str
    model: str
    num_speculative_tokens: int = Field(ge=1)
    attention_backend: str | None = None  # the draft's backend
    extra: dict[str, Any] = {}


class ServerSpec(Strict):
    host: str = "127.0.0.1"  # vLLM's default is all interfaces; ours is loopback
    port: int | None = Field(None, ge=1, le=65535)  # None: a free port at launch
    enable_prefix_caching: bool = True
    enforce_eager: bool = False
    max_num_batched_tokens: int | None = Field(None, ge=1)
    max_num_seqs: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    args: list[str] = []
    env: dict[str, str] = {}


class Launcher(Strict):
    kind: Literal["local", "slurm", "ray"] = "local"
    entrypoint: Literal["serve", "api_server"] = "serve"
    python: str | None = None  # server environment's interpreter; default from paths
    nodes: list[str] = []  # host names of a multi-node arm, node 0 first
    master_port: int = Field(29501, ge=1, le=65535)
    slurm_args: list[str] = []


class Timeouts(Strict):
    startup_s: float = Field(1800, gt=0)
    request_s: float = Field(600, gt=0)
    shutdown_s: float = Field(30, gt=0)


class Arm(Strict):
    name: str
    description: str = ""
    extends: str | None = None
    reference: str | None = None  # the arm this one is compared with; None for a reference
    eager_variant: str | None = None  # this arm under --enforce-eager (an `extends:` arm): graph_replay compares too
    model: ModelSpec
    parallelism: Parallelism = Parallelism()
    attention: Attention = Attention()
    dcp_env: DcpEnv = DcpEnv()
    speculative: Speculative | None = None
    server: ServerSpec = ServerSpec()
    launcher: Launcher = Launcher()
    gpus: list[int] | None = None  # CUDA_VISIBLE_DEVICES on each node
    timeouts: Timeouts = Timeouts()
    workloads: dict[str, str] = {}  # suite -> configs/workloads/<name>.yaml; the candidate's choice runs on both arms
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
    base, files = resolve_raw(parent, arms_dir, (*chain, name))
    base.pop("name", None)  # a name belongs to its own file, never inherited
    return deep_merge(base, raw), [path, *files]


def read_geometry(config_json: Path) -> dict:
    """Geometry fields from a Hugging Face config.json (text_config for wrapped models)."""
    cfg = json.loads(config_json.read_text())
    cfg = {**cfg.get("text_config", {}), **cfg} if "text_config" in cfg else cfg
    fields = Geometry.model_fields
    return {k: cfg[k] for k in fields if cfg.get(k) is not None}


def format_validation_error(exc: ValidationError, files: list[Path], name: str) -> str:
    where = files[0] if len(files) == 1 else f"{files[0]} (extends {', '.join(p.name for p in files[1:])})"
    lines = field_errors(exc, "unknown field (check the spelling; see configs/arms/README.md)")
    return "\n  ".join([f"arm {name!r} in {where} is invalid:", *lines])


def with_geometry(arm: Arm) -> Arm:
    """Fill geometry from config.json (local models); inline fields win."""
    spec = arm.model
    cfg_path = Path(spec.config_json) if spec.config_json else None
    if cfg_path is None and spec.source == "local":
        cfg_path = spec.local_dir() / "config.json"
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


def load_arm(name: str, overrides: list[str] | tuple[str, ...] = (), arms_dir: Path = ARMS_DIR) -> Arm:
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
    return with_geometry(arm)


def known_arms(arms_dir: Path = ARMS_DIR) -> list[str]:
    return sorted(p.stem for p in arms_dir.glob("*.yaml"))
