#!/usr/bin/env bash
# ON the two-GPU device (nvidia-h200-x2), after ../shared/gpu's device_install.sh: gpu-mla vs gpu-mla-ref with the
# per-arm suites, in series (MODE=serial) or side by side (MODE=parallel: one pytest-xdist worker per arm, each
# server on its own leased GPU). One mode per call (each fits the 10-minute limit); fresh reference stores, so both
# modes do the same work.
#
#   MODE=serial   bash scripts/device_parallel.sh
#   MODE=parallel bash scripts/device_parallel.sh
#
# $OUT/<mode>/: run.tar.gz, qualify_wall_s. Compare here: python benchmarks/parallel_vs_serial.py <serial> <parallel>
set -uo pipefail
MODE=${MODE:?MODE=serial or MODE=parallel}
SUITES=${SUITES:-kv_capacity,long_prefix,gsm8k}
OUT=${OUT:-/tmp/out}
export HARNESS_GPUS=${HARNESS_GPUS:-0,1} HARNESS_REFERENCE_DIR=/tmp/refs-$MODE
args=(--suites "$SUITES")
[ "$MODE" = parallel ] && args+=(--parallel)
OUT=$OUT/$MODE RUN_ID=par-$MODE QUALIFY_TIMEOUT_S=${QUALIFY_TIMEOUT_S:-540} bash scripts/device_qualify.sh gpu-mla "${args[@]}"
