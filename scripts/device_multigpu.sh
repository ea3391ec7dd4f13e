#!/usr/bin/env bash
# ON a multi-GPU device machine (planned, not yet run: the multi-GPU kinds are withheld), after the install calls
# (scripts/device_install_call.sh with .gpu-payload/p0 + each part, as on one GPU): one call per mode, against the
# state kept in .device-refs (the pinned tiny-mla, the reference store, calibrations: docs/gpu-runs.md, Kept state).
#
#   MODE=dcp2 bash scripts/device_multigpu.sh   # nvidia-h100-x2 / h200-x2: gpu-dcp2 (TP2 + DCP2) vs gpu-tp2
#   MODE=dcp8 bash scripts/device_multigpu.sh   # nvidia-h100-x8 / h200-x8: the same pair at TP8 (+ DCP8), the
#                                               # tiny MLA in place of the seed's Kimi-K3 (dcp8.yaml / tp8.yaml
#                                               # need the hub model: no network, 64 MiB a call)
#
# STEPS (default "calibrate qualify-1"): calibrate K=REPEATS (default 3) of the calibrated suites SUITES (default
# graph_replay,prefix_reuse,teacher_forcing: ~130 s a repeat on one H100 at TP1), then a clean qualify of the same
# suites judged by that calibration. Everything comes back as in device_calibrate.sh (runs.tar.gz, state.tgz,
# cache.tgz, info.tgz with timing.md and steps.txt).
set -uo pipefail
MODE=${MODE:?MODE=dcp2|dcp8}
SUITES=${SUITES:-graph_replay,prefix_reuse,teacher_forcing}
case $MODE in
  dcp2) SET=() ;;
  dcp8) all='[0,1,2,3,4,5,6,7]'
        SET=(--set parallelism.tp=8 --set parallelism.dcp=8 --set "gpus=$all"
             --set gpu-tp2:parallelism.tp=8 --set "gpu-tp2:gpus=$all") ;;
  *) echo "MODE must be dcp2 or dcp8, not $MODE" >&2; exit 2 ;;
esac
n=$(nvidia-smi -L 2>/dev/null | wc -l)
need=$([ "$MODE" = dcp8 ] && echo 8 || echo 2)
if [ "$n" -lt "$need" ]; then echo "error: MODE=$MODE needs $need GPUs, this machine has $n" >&2; exit 2; fi
ARM=gpu-dcp2 STEPS=${STEPS:-calibrate qualify-1} REPEATS=${REPEATS:-3} \
  CALIBRATE_ARGS="--suites $SUITES ${SET[*]}" QUALIFY_ARGS="--suites $SUITES ${SET[*]}" \
  bash scripts/device_calibrate.sh
