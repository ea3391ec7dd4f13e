#!/usr/bin/env bash
# DCP op conformance + mutation benchmark on the device (2 GPUs, vLLM 0.25.0 at $SITE on PYTHONPATH).
#
#   bash scripts/device_dcp_ops.sh                 # clean control, then every fault: apply -> op runner -> restore
#   FAULTS="lse_offset_1e-3 rank1_dropped" bash scripts/device_dcp_ops.sh
#   E2E_CMD='bash scripts/device_qualify.sh gpu-dcp2 --suites prefix_reuse' bash scripts/device_dcp_ops.sh
#
# Writes to $OUT: clean.json, faults/<fault>/{apply.json,ops.json,ops.log,restore.json[,e2e.log,e2e.rc]},
# timings.tsv (step, seconds, rc), env.txt, kill_matrix.{md,json,csv}. Every step has a timeout; a failed step is
# recorded and the run goes on, except a failed restore (the installed vLLM would stay patched): then it stops.
# E2E_CMD (optional) runs after the op runner under each fault (and once clean), with FAULT, E2E_OUT set; its
# exit code is the e2e column of the kill matrix.
# Split over calls (one 600 s call cannot hold every fault twice): E2E_FAULTS limits where E2E_CMD runs, OPS=0
# skips the op runner, SKIP_CLEAN=1 skips the clean control (run in an earlier call on the same warm machine).
# CPU dry run (here): copy vLLM 0.25.0's source to a dir with a vllm-0.25.0+cpu.dist-info/METADATA (so vLLM
# picks its CPU platform), then PY=.venv-server/bin/python SITE=<dir> DEVICE=cpu bash scripts/device_dcp_ops.sh
# (the Triton ops skip there; the pure-PyTorch length helper and the MLA query gather run on gloo ranks).
set -u
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
OUT=${OUT:-$REPO/dcp-ops-out}
WORLD=${WORLD:-2}
DEVICE=${DEVICE:-cuda}               # cpu: dry run on gloo ranks (Triton ops skip)
DEADLINE_S=${DEADLINE_S:-570}        # whole script; a step that would not fit is recorded as not run
STEP_TIMEOUT=${STEP_TIMEOUT:-150}    # one op-runner call (vLLM import ~10-20 s per rank process + cases)
E2E_CMD=${E2E_CMD:-}
E2E_FAULTS=${E2E_FAULTS:-all}        # where E2E_CMD runs: all, or a list of labels (clean and/or fault names)
OPS=${OPS:-1}                        # 0: skip the op runner under each fault (e2e only, ops measured in another call);
                                     #   or a list of fault names: the op runner only under those
SKIP_CLEAN=${SKIP_CLEAN:-0}          # 1: no clean control (it ran in an earlier call on the same machine)
E2E_TIMEOUT=${E2E_TIMEOUT:-400}
MUT="$PY -m harness.faults.mutations"

DEVICE_SITE=$SITE
source scripts/device_lib.sh
device_env  # never NVLink multicast
mkdir -p "$OUT/faults"
START=$(date +%s)
printf 'step\tseconds\trc\n' > "$OUT/timings.tsv"

left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }

# step NAME TIMEOUT LOG CMD...: run with a timeout, record seconds and rc, never abort the script
step() {
  local name=$1 limit=$2 log=$3; shift 3
  local t0=$(date +%s) rc
  if (( $(left) < 15 )); then
    printf '%s\t0\tnot-run(deadline)\n' "$name" >> "$OUT/timings.tsv"; echo "[dcp-ops] $name: not run (deadline)"
    return 124
  fi
  (( limit > $(left) - 5 )) && limit=$(( $(left) - 5 ))
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$(( $(date +%s) - t0 ))" "$rc" >> "$OUT/timings.tsv"
  echo "[dcp-ops] $name: rc $rc in $(( $(date +%s) - t0 )) s (left $(left) s)"
  return $rc
}

ops() {  # ops OUTFILE LABEL
  step "ops:$2" "$STEP_TIMEOUT" "${1%.json}.log" \
    $PY -m harness.opcheck.runner --world "$WORLD" --device "$DEVICE" --out "$1" --timeout $(( STEP_TIMEOUT - 20 )) --label "$2"
}

e2e() {  # e2e DIR FAULT
  [ -n "$E2E_CMD" ] || return 0
  [ "$E2E_FAULTS" = all ] || [[ " $E2E_FAULTS " == *" $2 "* ]] || return 0
  mkdir -p "$1/e2e"
  FAULT=$2 E2E_OUT="$1/e2e" step "e2e:$2" "$E2E_TIMEOUT" "$1/e2e.log" bash -c "$E2E_CMD"
  echo $? > "$1/e2e.rc"
}

cleanup() { $MUT restore --site-dir "$SITE" > "$OUT/final_restore.json" 2>&1; }
trap cleanup EXIT

{
  echo "date: $(date -Is)"; echo "python: $($PY -c 'import sys; print(sys.version)')"
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
  $PY -c 'import vllm; print("vllm", vllm.__version__, vllm.__file__)' 2>&1 | tail -1
  nvidia-smi -L 2>&1; env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM|VLLM)_' | sort
} > "$OUT/env.txt" 2>&1

step restore:leftover 30 "$OUT/restore_leftover.json" $MUT restore --site-dir "$SITE"
step verify 30 "$OUT/verify.txt" $MUT verify --source "$SITE"

if [ "$SKIP_CLEAN" != 1 ]; then
  ops "$OUT/clean.json" clean
  e2e "$OUT" clean && [ -f "$OUT/e2e.rc" ] && mv "$OUT/e2e.rc" "$OUT/clean_e2e.rc"
fi

FAULTS=${FAULTS:-$($PY -m harness.faults.mutations list --names)}
for f in $FAULTS; do
  d="$OUT/faults/$f"; mkdir -p "$d"
  if ! step "apply:$f" 30 "$d/apply.json" $MUT apply "$f" --site-dir "$SITE"; then
    $MUT restore --site-dir "$SITE" > "$d/restore.json" 2>&1; continue
  fi
  { [ "$OPS" = 1 ] || [[ " $OPS " == *" $f "* ]]; } && ops "$d/ops.json" "$f"
  e2e "$d" "$f"
  if ! step "restore:$f" 30 "$d/restore.json" $MUT restore --site-dir "$SITE"; then
    echo "[dcp-ops] restore after $f failed: stopping (see $d/restore.json)"; break
  fi
done

step kill_matrix 60 "$OUT/kill_matrix.log" $PY -m harness.faults.kill_matrix "$OUT"
cat "$OUT/kill_matrix.md" 2>/dev/null
echo "[dcp-ops] total $(( $(date +%s) - START )) s"
