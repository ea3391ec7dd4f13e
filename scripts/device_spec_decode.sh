#!/usr/bin/env bash
# ON the GPU device, from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in /tmp/site
# (carry .gpu-payload/harness and .gpu-payload/gsm8k as for device_qualify.sh): the spec_decode suite (+ kv_capacity,
# for the KV capacity with and without the draft) on speculative arms against their non-speculative references.
#
#   bash scripts/device_spec_decode.sh                     # one H200: gpu-mtp (MTP, TP1), then gpu-draft
#   ARMS=gpu-mtp-dcp2 bash scripts/device_spec_decode.sh   # two H200s: MTP on TP2 + DCP2 vs gpu-mtp-tp2
#
# Models (made here with the harness's generator, kept under $KEEP so later calls on a warm machine reuse them):
# models/tiny-mla-mtp (DeepseekV3 + a trained MTP layer, --arch deepseek_v3_mtp) and, for gpu-draft, models/tiny-mla
# and models/tiny-llama-gpu (the draft: the tiny Llama, trained on the GPU). Per arm, $OUT gets:
#   plan-<arm>.txt       `harness plan`: argv with --speculative-config, the method check against vLLM 0.25.0
#   spec-<arm>.md        the Spec decode table (acceptance length, per-position curve, speed-up) + Gates + Servers
#   spec-<arm>.json      the run's spec_decode / gate / server records (what the tables are made from)
#   refusal-<arm>.txt    only when the candidate's server did not start: vLLM's own refusal line and the log tail
#   spec-<arm>.tar.gz    the run directory (server logs cut to their tails)
# plus tiny_model_mtp.json (the MTP layer's held-out next-next-token accuracy) and versions.txt.
set -uo pipefail
ARMS=${ARMS:-gpu-mtp gpu-draft}
source scripts/device_lib.sh
device_start
device_keep "${SPEC_KEEP:-/tmp/keep}"
keep_model tiny-mla-mtp deepseek_v3_mtp || exit 3
cp "$KEEP/tiny-mla-mtp/tiny_model.json" "$OUT/tiny_model_mtp.json"
if [[ " $ARMS " == *" gpu-draft "* ]]; then
  keep_model tiny-mla deepseek_v3 || exit 3
  keep_model tiny-llama-gpu llama || exit 3
fi
say "models ready: $(python3 -c 'import json; print(json.load(open("models/tiny-mla-mtp/tiny_model.json")).get("mtp"))')"

code=0
for ARM in $ARMS; do
  RUN=spec-$ARM-$(date +%H%M%S)
  if [ "${PLAN:-1}" = 1 ]; then  # PLAN=0 saves ~45 s per arm on the device (plan imports vLLM to check the argv)
    python3 -m harness plan --arm "$ARM" > "$OUT/plan-$ARM.txt" 2>&1
    say "plan $ARM: exit $? ($(grep -E 'speculative_method_known|vllm_parses_argv' "$OUT/plan-$ARM.txt" | tr -s ' ' | tr '\n' ' '))"
  fi
  timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-420}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" \
    --suites spec_decode,kv_capacity > "$KEEP/$RUN.log" 2>&1
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
