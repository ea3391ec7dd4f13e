#!/usr/bin/env bash
# ON the GPU device machine, from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in
# /tmp/site: install the harness's missing dependencies, check the carried tiny MLA model against its pin, run
# `qualify` for one arm against its reference with every suite, and bring the run directory back through $OUT (one
# archive) with the state for the next call (save_state: copy it into .device-refs/ here).
#
#   bash scripts/device_qualify.sh gpu-mla [extra qualify arguments]     (one H200)
#   bash scripts/device_qualify.sh gpu-dcp2 --suites kv_capacity,...      (two H200s)
#
# Exits with qualify's code; whatever the run wrote is copied out even when it fails or runs out of time.
set -uo pipefail
ARM=${1:?usage: device_qualify.sh ARM [qualify args]}
shift
RUN=${RUN_ID:-$ARM-$(date +%Y%m%d-%H%M%S)}
source scripts/device_lib.sh
device_start
device_keep /tmp/keep
keep_model tiny-mla || exit 3
echo "setup: $(( $(date +%s) - t0 )) s"
q0=$(date +%s.%N)
timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-500}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" "$@"
code=$?
python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$q0" "$(date +%s.%N)" \
  | tee "$OUT/qualify_wall_s" | sed 's/^/qualify wall s: /'
echo "qualify exit code $code after $(( $(date +%s) - t0 )) s"
R=$HARNESS_REPORTS_DIR/$RUN
# $OUT brings back only a few files: one archive of the run (server logs cut to their tails), the headline files and
# the state for the next call (save_state).
tail_server_logs "$R"
tar czf "$OUT/run.tar.gz" -C "$HARNESS_REPORTS_DIR" "$RUN"
save_state
[ -f "$R/annotation.md" ] && cp "$R/annotation.md" "$OUT/"
cp models/tiny-mla/tiny_model.json "$OUT/" 2>/dev/null
record_versions
exit $code
