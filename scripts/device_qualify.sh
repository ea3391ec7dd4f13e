#!/usr/bin/env bash
# ON the GPU device machine, from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in
# /tmp/site: install the harness's missing dependencies, generate the tiny MLA model, run `qualify` for one arm
# against its reference with every suite, and bring the run directory back through $OUT (one archive).
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
if [ ! -f models/tiny-mla/config.json ]; then make_tiny_mla "$PWD/models/tiny-mla.d" "$OUT/tiny-mla.log" || exit 3; fi
echo "setup: $(( $(date +%s) - t0 )) s; model: $(cat models/tiny-mla/tiny_model.json | tr -d '\n ')"
q0=$(date +%s.%N)
timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-500}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" "$@"
code=$?
python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$q0" "$(date +%s.%N)" \
  | tee "$OUT/qualify_wall_s" | sed 's/^/qualify wall s: /'
echo "qualify exit code $code after $(( $(date +%s) - t0 )) s"
R=reports/$RUN
# $OUT brings back only a few files: one archive of the run (server logs cut to their tails) plus the headline files.
tail_server_logs "$R"
tar czf "$OUT/run.tar.gz" -C reports "$RUN" references 2>/dev/null || tar czf "$OUT/run.tar.gz" -C reports "$RUN"
[ -f "$R/annotation.md" ] && cp "$R/annotation.md" "$OUT/"
cp models/tiny-mla/tiny_model.json "$OUT/" 2>/dev/null
record_versions
exit $code
