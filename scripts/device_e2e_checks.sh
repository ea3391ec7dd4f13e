#!/usr/bin/env bash
# ON the 2-GPU device (nvidia-h200-x2), from the repository root, after ../shared/gpu's device_install.sh put vLLM
# 0.25.0 in /tmp/site (and, as for device_qualify.sh, .gpu-payload/harness and .gpu-payload/gsm8k are carried):
# one end-to-end sensitivity run of gpu-dcp2 against the stored gpu-tp2 reference, labelled for the kill matrix.
#
#   bash scripts/device_e2e_checks.sh control          # first: generates the model, captures gpu-tp2 once,
#                                                      #   stores this run's comparisons as the noise floor
#   bash scripts/device_e2e_checks.sh control-repeat   # optional: a second clean run -> the floor's noise (paired sd)
#   bash scripts/device_e2e_checks.sh <fault-label>    # after the mutation script patched /tmp/site/vllm
#
# Everything that must outlive one call sits under /tmp/keep (model, reference store, floor, a log per label);
# each run writes $OUT/e2e-<label>.json (compact summary: check verdicts, teacher forcing, paired floor tests,
# smallest detectable shift) and $OUT/e2e-<label>.tar.gz (results.jsonl, comparisons, server log tail).
# Knobs: E2E_EAGER=1 (default: the candidate runs --enforce-eager: ~30 s less start-up, the DCP combine is the same
# code; 0 keeps CUDA graphs), E2E_CHECK_DETERMINISM=1 (generate it on the GPU a second time
# and compare the weights hash: the carried model is pinned, docs/gpu-runs.md), QUALIFY_TIMEOUT_S (default 400 for the first run, else 240),
# E2E_CALIBRATION=<json [[lse_offset, shift], ...]> for the smallest-LSE-offset sentence.
# Exit code: qualify's (0 = every check passed at the fixed limits); the paired verdict is in the JSON.
set -uo pipefail
LABEL=${1:?usage: device_e2e_checks.sh LABEL}
case "$LABEL" in *[!A-Za-z0-9._+-]*) echo "label must be [A-Za-z0-9._+-]" >&2; exit 2;; esac
ARM=${E2E_ARM:-gpu-dcp2}  # E2E_ARM=cpu-smoke E2E_MODEL=0 PY=.venv/bin/python: a dry run of this script on CPU
PY=${PY:-${E2E_PYTHON:-python3}}
RUN=e2e-$LABEL-$(date +%H%M%S)
source scripts/device_lib.sh
device_start
# A reference store (with the product's floors) and this script's e2e-floor brought back by an earlier device
# session: carry .device-refs/references.tgz (this script writes $OUT/references.tgz) and the stored gpu-tp2
# reference is reused, not captured again, and fault runs are judged against that session's control.
device_keep "${E2E_KEEP:-/tmp/keep}"
fresh=0
if [ "${E2E_MODEL:-1}" = 1 ]; then
  [ -f "$KEEP/tiny-mla/config.json" ] || fresh=1
  keep_model tiny-mla || exit 3
  cp "$KEEP/tiny-mla/tiny_model.json" "$OUT/tiny_model.json"
  say "model: $(tr -d '\n ' < "$KEEP/tiny-mla/tiny_model.json" | cut -c1-600)"
fi
if [ "${E2E_CHECK_DETERMINISM:-0}" = 1 ] && [ -f "$KEEP/tiny-mla/config.json" ]; then
  rm -rf "$KEEP/tiny-mla-again"
  python3 -m harness.tinymodel --arch deepseek_v3 --device cuda --out "$KEEP/tiny-mla-again" \
    --gsm8k-train "$HARNESS_GSM8K_DIR/train.jsonl" > "$KEEP/tiny-mla-again.log" 2>&1
  python3 - "$KEEP" > "$OUT/determinism.json" <<'PY'
import hashlib, json, sys
from pathlib import Path
k = Path(sys.argv[1])
runs = [json.loads((k / d / "tiny_model.json").read_text()) for d in ("tiny-mla", "tiny-mla-again")]
files = [hashlib.sha256((k / d / "model.safetensors").read_bytes()).hexdigest() for d in ("tiny-mla", "tiny-mla-again")]
print(json.dumps({"weights_sha256": [r["weights_sha256"] for r in runs], "file_sha256": files,
                  "final_loss": [r["final_loss"] for r in runs],
                  "identical": runs[0]["weights_sha256"] == runs[1]["weights_sha256"] and files[0] == files[1]}))
PY
  say "determinism: $(cat "$OUT/determinism.json")"
  rm -rf "$KEEP/tiny-mla-again"
fi
SET=(--set eager_variant=null)
[ "${E2E_EAGER:-1}" = 1 ] && SET+=(--set server.enforce_eager=true)
first=$([ -d "$KEEP/e2e-floor" ] && echo 0 || echo 1)
limit=${QUALIFY_TIMEOUT_S:-$([ "$first" = 1 ] && echo 400 || echo 240)}
say "qualify $ARM (run $RUN, timeout ${limit}s, ${SET[*]})"
timeout --signal=TERM "$limit" "$PY" -m harness qualify --arm "$ARM" --run-id "$RUN" --no-vllm-check \
  --suites prefix_reuse,graph_replay,teacher_forcing "${SET[@]}" > "$KEEP/$RUN.qualify.log" 2>&1
code=$?
tail -25 "$KEEP/$RUN.qualify.log"
say "qualify exit code $code"
R=${HARNESS_REPORTS_DIR:-reports}/$RUN
CAL=()
[ -n "${E2E_CALIBRATION:-}" ] && CAL=(--calibration "$E2E_CALIBRATION")
"$PY" -m harness.report.e2e_summary --run "$R" --arm "$ARM" --floor "$KEEP/e2e-floor" --label "$LABEL" \
  --out "$OUT/e2e-$LABEL.json" --qualify-exit "$code" "${CAL[@]}" || say "summary failed"
cp "$OUT/e2e-$LABEL.json" "$KEEP/" 2>/dev/null
case "$LABEL" in control*|clean*)  # a passing clean run becomes the pair's known-good floor inside the product too
  [ "$code" = 0 ] && "$PY" -m harness accept-floor --run "$R" --arm "$ARM" | tee "$OUT/accept-floor-$LABEL.txt";;
esac
pack_run "$RUN" "e2e-$LABEL" "$KEEP/$RUN.qualify.log"
save_references  # for the next session: .device-refs/
say "done: $OUT/e2e-$LABEL.json"
exit $code
