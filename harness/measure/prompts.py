"""Deterministic token-id prompts: drawn from a seeded generator over the model's vocabulary minus its special
tokens, so the shared prefix is byte-identical across arms and runs and the client needs no tokenizer."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from harness.config.arms import Arm, model_files, server_env
from harness.config.errors import ConfigError
from harness.config.hub_cache import hub_cache_dir
from harness.config.workloads import LongPrefixWorkload, MetricWorkload, ReferenceChecksWorkload


@dataclass(frozen=True)
class TokenSpace:
    """Token ids a prompt may use: the vocabulary minus special/added tokens, and minus the model's reserved needle
    tokens (usable as needles, never as random filler: a tiny model's retrieval circuit reacts to them)."""

    vocab_size: int
    excluded: frozenset[int]
    reserved: frozenset[int] = frozenset()

    def allowed(self) -> list[int]:
        return [i for i in range(self.vocab_size) if i not in self.excluded and i not in self.reserved]


def reserved_token_ids(model_dir: Path) -> set[int]:
    """tiny_model.json's `needle_tokens` (harness/tinymodel/retrieval.py writes them); empty when absent."""
    path = model_dir / "tiny_model.json"
    try:
        tokens = json.loads(path.read_text()).get("needle_tokens") if path.is_file() else None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is unreadable ({exc}); regenerate the model (`make model`)") from None
    return {t for t in tokens if isinstance(t, int)} if isinstance(tokens, list) else set()


def special_token_ids(model_dir: Path) -> set[int]:
    """Added/special token ids of a Hugging Face tokenizer: tokenizer.json's `added_tokens`, and
    tokenizer_config.json's `added_tokens_decoder` (the only listing of a tiktoken tokenizer such as Kimi's)."""
    out: set[int] = set()
    tok = model_dir / "tokenizer.json"
    if tok.is_file():
        out |= {t["id"] for t in json.loads(tok.read_text()).get("added_tokens", [])}
    tok_cfg = model_dir / "tokenizer_config.json"
    if tok_cfg.is_file():
        out |= {int(i) for i in json.loads(tok_cfg.read_text()).get("added_tokens_decoder", {})}
    return out


def token_space(arm: Arm, workload: LongPrefixWorkload | ReferenceChecksWorkload) -> TokenSpace:
    """From the model's config.json and tokenizer files (a local model, or a hub model in the local Hugging Face
    cache); a hub model that is not cached needs workload.vocab_size."""
    excluded = set(workload.exclude_token_ids)
    reserved: set[int] = set()
    vocab = workload.vocab_size
    model_dir = model_files(arm)
    if model_dir is not None and (arm.model.source == "local" or (model_dir / "config.json").is_file()):
        cfg = json.loads((model_dir / "config.json").read_text())
        vocab = vocab or cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
        excluded |= {cfg[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if isinstance(cfg.get(k), int)}
        excluded |= special_token_ids(model_dir)
        reserved = reserved_token_ids(model_dir)
    if not vocab:
        cached = "" if arm.model.source == "local" else (
            f" (hub model {arm.model.path} is not in the local Hugging Face cache {hub_cache_dir(server_env(arm))})")
        raise ConfigError(f"workload {workload.name!r}: vocabulary size of arm {arm.name!r} unknown{cached}; "
                          "set vocab_size in the workload YAML")
    return TokenSpace(int(vocab), frozenset(excluded), frozenset(reserved - excluded))


@dataclass(frozen=True)
class Prompts:
    prefix: list[int]
    warmup: list[list[int]]  # full prompts (prefix + own suffix)
    measured: dict[int, list[list[int]]]  # concurrency -> full prompts

    def fingerprint(self) -> str:
        """Hash of every prompt: equal across arms and runs for the same workload and vocabulary."""
        h = hashlib.sha256()
        for prompt in [*self.warmup, *(p for level in self.measured.values() for p in level)]:
            h.update(json.dumps(prompt).encode())
        return h.hexdigest()[:16]


def build_prompts(workload: LongPrefixWorkload, space: TokenSpace) -> Prompts:
    """Pure: the same workload and token space always give the same prompts."""
    allowed = space.allowed()
    rng = random.Random(workload.seed)
    prefix = rng.choices(allowed, k=workload.prefix_tokens)

    def one() -> list[int]:
        return prefix + rng.choices(allowed, k=workload.suffix_tokens)

    warmup = [one() for _ in range(workload.warmup_requests)]
    measured = {c: [one() for _ in range(workload.requests_per_level)] for c in workload.concurrency}
    return Prompts(prefix, warmup, measured)


def metric_prompts(workload: MetricWorkload, space: TokenSpace) -> tuple[list[list[int]], list[list[int]]]:
    """A timing suite's (warm-up, measured) prompts, seeded: the warm-up covers every length (a new shape's first
    prefill pays one-off costs), and no prompt repeats (no prefix-cache hit)."""
    allowed, rng = space.allowed(), random.Random(workload.seed)
    warmup = [rng.choices(allowed, k=n) for n in workload.lengths for _ in range(workload.warmup_requests)]
    return warmup, [rng.choices(allowed, k=n) for n in workload.lengths for _ in range(workload.requests_per_length)]
