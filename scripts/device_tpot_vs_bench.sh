#!/usr/bin/env bash
# ON one H200 (nvidia-h200), after ../shared/gpu's device_install.sh and one scripts/device_qualify.sh call (it installs
# the harness's wheels and generates models/tiny-mla): the harness's TPOT against `vllm bench serve` on one gpu-mla
# server (benchmarks/long_prefix_vs_vllm_bench.py): the same prompts for both clients (the harness as token ids and as
# text, the bench as that text in a custom dataset), greedy, ignore_eos, c1, one cache_salt per client, the clients'
# order rotating every round, and the server's own histograms (1 % buckets where vLLM takes
# --custom-histogram-buckets; COARSE=1 keeps vLLM's default buckets).
#
#   bash scripts/device_tpot_vs_bench.sh            (REQUESTS=16 ROUNDS=6 WORKLOAD=long_prefix_gpu_smoke)
#
# $OUT/tpot_vs_bench.txt: the prompt round trip, per round TTFT/TPOT p50 of the three clients and the server, the
# median ratios over rounds, the stream tail after the last token, client CPU per streamed token.
set -uo pipefail
source scripts/device_lib.sh
device_start
args=(--arm gpu-mla --workload "${WORKLOAD:-long_prefix_gpu_smoke}" --requests "${REQUESTS:-16}" --rounds "${ROUNDS:-6}")
[ "${COARSE:-0}" = 1 ] && args+=(--coarse-buckets)
timeout --signal=TERM 560 python3 benchmarks/long_prefix_vs_vllm_bench.py "${args[@]}" 2>&1 | tee "$OUT/tpot_vs_bench.txt"
exit "${PIPESTATUS[0]}"
