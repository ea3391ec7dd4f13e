#!/usr/bin/env bash
# ON one H200 (nvidia-h200), after ../shared/gpu's device_install.sh and one scripts/device_qualify.sh call (it installs
# the harness's wheels and generates models/tiny-mla): the harness's TPOT against `vllm bench serve` on one gpu-mla
# server, alternating rounds (benchmarks/long_prefix_vs_vllm_bench.py), with the server's own histograms.
#
#   bash scripts/device_tpot_vs_bench.sh            (REQUESTS=12 ROUNDS=4 WORKLOAD=long_prefix_gpu_smoke)
#
# $OUT/tpot_vs_bench.txt: per round TTFT/TPOT p50 of both clients and their ratios, the median ratio over rounds.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0
export PYTHONPATH=/tmp/site:/tmp/hsite:$PWD HARNESS_SERVER_PYTHON=python3
timeout --signal=TERM 560 python3 benchmarks/long_prefix_vs_vllm_bench.py --arm gpu-mla \
  --workload "${WORKLOAD:-long_prefix_gpu_smoke}" --requests "${REQUESTS:-12}" --rounds "${ROUNDS:-4}" \
  2>&1 | tee "$OUT/tpot_vs_bench.txt"
exit "${PIPESTATUS[0]}"
