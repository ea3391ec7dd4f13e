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
source scripts/device_lib.sh
device_start
device_keep /tmp/keep
# The model lives outside the repository copy, so the next call on the same machine finds it (and the same weights).
[ -f models/tiny-mla/config.json ] || keep_model tiny-mla || exit 3
cp models/tiny-mla/tiny_model.json "$OUT/" 2>/dev/null
timeout --signal=TERM "${TIMEOUT_S:-560}" python3 benchmarks/capacity_vs_vllm_bench.py \
  --arms "${ARMS:-gpu-mla-kvcap,gpu-mla-ref-kvcap}" --rounds "${ROUNDS:-4}" --repeat "${REPEAT:-1}" \
  ${MAX_LEVEL:+--max-level "$MAX_LEVEL"} --out "$OUT/capacity_vs_bench.json" \
  2>&1 | tee "$OUT/capacity_vs_bench.txt"
exit "${PIPESTATUS[0]}"
