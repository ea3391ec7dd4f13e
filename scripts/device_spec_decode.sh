#!/usr/bin/env bash
# ON the GPU device, from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in /tmp/site
# (carry .gpu-payload/harness and .gpu-payload/gsm8k as for device_qualify.sh): the spec_decode suite (acceptance and
# output equality) and every output check of the target (SUITES) on speculative arms against their non-speculative
# references, with CUDA graphs (vLLM's default, FULL for the verify batches) and under --enforce-eager.
#
#   bash scripts/device_spec_decode.sh        # gpu-mtp(-eager), gpu-draft(-eager): every model kept by earlier calls
#   (not yet timed on a device: where one 10-minute call cannot hold every arm, split ARMS over calls)
#   ARMS="gpu-mtp gpu-mtp-eager" SUITES=spec_decode,output_coverage bash scripts/device_spec_decode.sh
#   ARMS=gpu-mtp FAULT=spec_placeholder_leak bash scripts/device_spec_decode.sh   # the planted leak: must FAIL
#   ARMS=gpu-mtp-dcp2 bash scripts/device_spec_decode.sh        # two H200s: MTP on TP2 + DCP2 vs gpu-mtp-tp2
#
# FAULT: a fault of harness/faults/spec_faults.py (table gpu_spec) planted in a scratch copy of /tmp/site/vllm, each
# arm of ARMS run as its faulted variant (judged by the arm's calibration): the verdict must be FAIL on output
# equality and the token-run detector while the acceptance counters look as the clean arm's.
# Models: the pinned models the arms and their references serve (arm_models), generated on CPU (`make device-models`),
# carried as .device-refs/NAME and kept under $KEEP, so a later call on the warm machine needs none carried:
# tiny-mla-mtp (DeepseekV3 + a trained MTP layer) for the gpu-mtp arms; tiny-mla (target) and tiny-llama (draft) for
# the gpu-draft arms. The three (43 + 27 + 20 MiB) do not fit one call (64 MiB with the 14 MiB tree), so a session
# splits ARMS by model; carry (`bash scripts/device_state.sh size PATH...` sums a list; 2026-12-07: 57 and 62 MiB):
#   ARMS="gpu-mtp gpu-mtp-eager"       .gpu-payload/p0 .device-refs/tiny-mla-mtp
#   ARMS="gpu-draft gpu-draft-eager"   .gpu-payload/p0 .device-refs/tiny-mla .device-refs/tiny-llama
# The harness wheel and the kept state fit neither: carry .gpu-payload/harness, .device-refs/state.tgz and
# .device-refs/cache.tgz with the p4 install call (61 MiB), which installs the wheel and restores the state for the
# machine's later calls. Name .device-refs' files one by one: carrying .device-refs whole replaces what is there.
# Per arm, $OUT gets:
#   plan-<arm>.txt       `harness plan`: argv with --speculative-config, the method check against vLLM 0.25.0
#   spec-<arm>.md        the Spec decode table (acceptance length, per-position curve, speed-up) + Gates + Checks
#   spec-<arm>.json      the run's spec_decode / gate / server / reference_check records (what the tables are made from)
#   refusal-<arm>.txt    only when the candidate's server did not start: vLLM's own refusal line and the log tail
#   spec-<arm>.tar.gz    the run directory (server logs cut to their tails)
# plus tiny_model_mtp.json (the MTP layer's held-out next-next-token accuracy) and versions.txt.
set -uo pipefail
ARMS=${ARMS:-gpu-mtp gpu-mtp-eager gpu-draft gpu-draft-eager}
# the target's output checks beside spec_decode: long generations, short prompts, chunk boundaries, multi-turn and the
# KV families (output_coverage), the grid's bursts (long_context), changing-batch replay (graph_replay)
SUITES=${SUITES:-spec_decode,kv_capacity,output_coverage,long_context,graph_replay}
FAULT=${FAULT:-}
source scripts/device_lib.sh
device_start
device_keep "${SPEC_KEEP:-/tmp/keep}"
MODELS=$(arm_models $ARMS) || exit 2
for m in $MODELS; do keep_model "$m" || exit 3; done
mtp=""
if [ -f models/tiny-mla-mtp/tiny_model.json ]; then
  cp models/tiny-mla-mtp/tiny_model.json "$OUT/tiny_model_mtp.json"
  mtp="; mtp $(python3 -c 'import json; print(json.load(open("models/tiny-mla-mtp/tiny_model.json")).get("mtp"))')"
fi
say "models ready: $(echo $MODELS)$mtp"

code=0
if [ -n "$FAULT" ]; then  # each arm of ARMS becomes its faulted variant, in arms of its own
  export HARNESS_ARMS_DIR=$KEEP/arms-$FAULT
  rm -rf "$HARNESS_ARMS_DIR"; cp -r configs/arms "$HARNESS_ARMS_DIR"
  python3 -m harness.faults.length_faults scratch "$FAULT" --table gpu_spec --site /tmp/site --out "$KEEP/sf/$FAULT" \
    > "$OUT/scratch-$FAULT.json" 2>&1 || { cat "$OUT/scratch-$FAULT.json"; exit 4; }
  faulted=""
  for ARM in $ARMS; do
    faulted+=" $(python3 -m harness.faults.length_faults arm "$FAULT" --l 0 --scratch "$KEEP/sf/$FAULT" \
      --arms-dir "$HARNESS_ARMS_DIR" --base "$ARM" --reference "$(python3 -c "from harness.config.arms import load_arm
print(load_arm('$ARM').reference)")" --pythonpath-tail /tmp/site)"
  done
  ARMS=$faulted
  say "faulted arms:$ARMS"
fi
for ARM in $ARMS; do
  RUN=spec-$ARM-$(date +%H%M%S)
  if [ "${PLAN:-1}" = 1 ]; then  # PLAN=0 saves ~45 s per arm on the device (plan imports vLLM to check the argv)
    python3 -m harness plan --arm "$ARM" > "$OUT/plan-$ARM.txt" 2>&1
    say "plan $ARM: exit $? ($(grep -E 'speculative_method_known|vllm_parses_argv' "$OUT/plan-$ARM.txt" | tr -s ' ' | tr '\n' ' '))"
  fi
  timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-540}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" \
    --suites "$SUITES" > "$KEEP/$RUN.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && code=$rc
  say "qualify $ARM: exit $rc"
  R=${HARNESS_REPORTS_DIR:-reports}/$RUN
  { echo "# $ARM (qualify exit $rc)"; for t in spec_decode gates kv_capacity servers checks; do
      [ -f "$R/tables/$t.md" ] && { echo; echo "## $t"; cat "$R/tables/$t.md"; }; done; } > "$OUT/spec-$ARM.md"
  python3 - "$R" > "$OUT/spec-$ARM.json" <<'PY'
import json, sys
from pathlib import Path
rows = [json.loads(l) for l in (Path(sys.argv[1]) / "results.jsonl").read_text().splitlines() if l.strip()] \
    if (Path(sys.argv[1]) / "results.jsonl").is_file() else []
print(json.dumps([r for r in rows if r.get("kind") in ("spec_decode", "gate", "server", "degeneration",
                                                       "reference_check", "kv_capacity")], indent=1))
PY
  cand_log="$R/$ARM/server.log"
  up=$(python3 -c "import json,sys; print(any(r.get('kind') == 'server' and r.get('arm') == sys.argv[2] and r.get('status') == 'up'
           for r in map(json.loads, open(sys.argv[1]))))" "$R/results.jsonl" "$ARM" 2>/dev/null)
  if [ "$up" != True ]; then
    { echo "arm $ARM: the server did not come up under vLLM $(python3 -c 'import vllm; print(vllm.__version__)' 2>/dev/null)"
      python3 -c "from harness.serve.serverlog import spec_refusal; import sys; print('refusal:', spec_refusal(open(sys.argv[1]).read()))" "$cand_log" 2>&1
      echo "--- log tail"; tail -40 "$cand_log" 2>/dev/null; } > "$OUT/refusal-$ARM.txt"
    say "$ARM did not start: $(sed -n 2p "$OUT/refusal-$ARM.txt")"
  fi
  tail -30 "$KEEP/$RUN.log"
  pack_run "$RUN" "spec-$ARM" "$KEEP/$RUN.log"
done
record_versions
say "done (exit $code)"
exit $code
