#!/usr/bin/env bash
# ON one GPU (nvidia-h200 / nvidia-h100-x1), after ../shared/gpu's device_install.sh (it makes models/tiny-mla in
# /tmp/keep when no earlier call on the warm machine did, as scripts/device_qualify.sh does): the capacity
# suite's level measurement against `vllm bench serve --max-concurrency N` at the same levels on the same prompts,
# candidate then reference (benchmarks/capacity_vs_vllm_bench.py; KV capped so the ramp saturates within the call).
#
#   bash scripts/device_capacity_vs_bench.sh        (ARMS=gpu-mla-kvcap,gpu-mla-ref-kvcap ROUNDS=4 REPEAT=1 MAX_LEVEL=)
#
# One arm per call when both do not fit in one (ARMS=gpu-mla-kvcap, then ARMS=gpu-mla-ref-kvcap); the two files then
# give the candidate/reference ratios here: benchmarks/capacity_vs_vllm_bench.py --report-from CAND.json REF.json
#
# $OUT/capacity_vs_bench.{txt,json}: per arm and level both clients' throughput, TPOT/TTFT p50, KV-usage peak and
# their ratios; the candidate/reference ratio as each client measured it.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0
export PYTHONPATH=/tmp/site:/tmp/hsite:$PWD HARNESS_SERVER_PYTHON=python3
if [ ! -f /tmp/hsite/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/hsite .gpu-payload/harness/*.whl && touch /tmp/hsite/.installed
fi
# The model lives outside the repository copy, so the next call on the same machine finds it (and the same weights).
if [ ! -f models/tiny-mla/config.json ]; then
  mkdir -p /tmp/keep models
  [ -f /tmp/keep/tiny-mla/config.json ] || python3 -m harness.tinymodel --arch deepseek_v3 --device cuda \
    --out /tmp/keep/tiny-mla --gsm8k-train .gpu-payload/gsm8k/train.jsonl > "$OUT/tiny-mla.log" 2>&1 \
    || { tail -30 "$OUT/tiny-mla.log"; exit 3; }
  ln -sfn /tmp/keep/tiny-mla models/tiny-mla
fi
cp models/tiny-mla/tiny_model.json "$OUT/" 2>/dev/null
timeout --signal=TERM "${TIMEOUT_S:-560}" python3 benchmarks/capacity_vs_vllm_bench.py \
  --arms "${ARMS:-gpu-mla-kvcap,gpu-mla-ref-kvcap}" --rounds "${ROUNDS:-4}" --repeat "${REPEAT:-1}" \
  ${MAX_LEVEL:+--max-level "$MAX_LEVEL"} --out "$OUT/capacity_vs_bench.json" \
  2>&1 | tee "$OUT/capacity_vs_bench.txt"
exit "${PIPESTATUS[0]}"
