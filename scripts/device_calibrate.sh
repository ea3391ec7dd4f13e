#!/usr/bin/env bash
# ON the GPU device machine: calibrate an arm, then qualify it, against one reference store and model kept in
# /tmp/keep while the machine stays warm (call it again, back to back, to continue). Issue 36's control:
#
#   ARM=gpu-mla STEPS="calibrate" bash scripts/device_calibrate.sh                 (first call, with the install)
#   ARM=gpu-mla STEPS="qualify-1 qualify-2" bash scripts/device_calibrate.sh       (next calls)
#
# The model is the pinned tiny-mla carried in .device-refs (keep_model); with AWAIT_MODEL=1 it is the one
# start_cpu_generation began in an earlier call of this machine (its pin comes back as $OUT/tiny-mla.yaml, and with
# RETURN_MODEL=1 its files as $OUT/tiny-mla.tgz.part_*). The state for the next call comes back as $OUT/state.tgz and
# cache.tgz (save_state; `bash scripts/device_state.sh take DIR` here), small files in $OUT/info.tgz, and a
# per-step timing table of every run of the call in timing.md (inside info.tgz).
#
# STEPS, in order, each skipped when less than 60 s of DEADLINE_S (default 570) is left:
#   calibrate    python -m harness calibrate --arm $ARM [--repeats $REPEATS: default the arm's min_repeats] --id ${CAL_ID:-cal-$ARM}
#   trust        only after a `calibrate` of this call that exited 2 (refused): the same repeats stored with
#                `--from-runs ... --trust "$TRUST"` (an arm's first calibration on a GPU: its repeats were judged by
#                gates.yaml's seed limits, which clean bf16 noise exceeds; the reason stays on every line it judges)
#   qualify-N    python -m harness qualify --arm $ARM (default suites), run id $ARM-qualify-N
#   batch-invariant  the same qualify of $ARM-batch-invariant: $ARM with VLLM_BATCH_INVARIANT=1 (split-KV count 1, fixed
#                reduction order: a legitimate build that must pass), judged by $ARM's calibration (calibration_from)
#   calibrate-fault:NAME:L[:EPS]  the same faulty build calibrated as an arm of its own (no calibration_from: a
#                first calibration, judged by its independent float32 anchor), FAULT_CALIBRATE_ARGS (default
#                --suites teacher_forcing); it must be refused (exit 2); cut by the deadline, it continues next call
#   fault:NAME:L[:EPS]  a planted length fault of harness/faults/length_faults (table gpu) past L tokens, in a
#                scratch copy of /tmp/site/vllm, as a variant of $ARM judged by $ARM's calibration (calibration_from),
#                with FAULT_SUITES (default: the length-sensitive calibrated suites); EPS sets HARNESS_FAULT_EPS
#                (precision_loss_past_L's strength)
# Every run directory made by this call comes back in $OUT/runs.tar.gz (server logs cut), with the calibration
# table, the floors' calibration files and the exit code of each step in $OUT/steps.txt.
set -uo pipefail
ARM=${ARM:?ARM=arm}
source scripts/device_lib.sh
device_start
device_keep /tmp/keep
deadline=$(( t0 + ${DEADLINE_S:-570} ))
cal_id=${CAL_ID:-cal-$ARM}  # another id where repeats of other measuring code are kept under the default one
marker=$KEEP/.call-$t0 && touch "$marker"
if [ "${AWAIT_MODEL:-0}" = 1 ]; then await_cpu_generation tiny-mla || exit 3; fi
keep_model tiny-mla || exit 3
if [ "${RETURN_MODEL:-0}" = 1 ]; then return_model tiny-mla; fi
echo "setup: $(( $(date +%s) - t0 )) s"
# The same command can be sent again, back to back: a step that ended is not run again ($KEEP/.step-done-*); a
# calibrate cut by the deadline continues its repeats; any other step starts only with STEP_MIN_S left (a qualify cut
# midway leaves a run id that cannot be reused).
for step in ${STEPS:-calibrate}; do
  if [ -f "$KEEP/.step-done-$cal_id-$step" ]; then echo "$step: ended in an earlier call ($(cat "$KEEP/.step-done-$cal_id-$step"))"; continue; fi
  left=$(( deadline - $(date +%s) ))
  need=$(case $step in calibrate|calibrate-fault:*) echo 60 ;; *) echo "${STEP_MIN_S:-150}" ;; esac)
  if [ "$left" -lt "$need" ]; then echo "$step skipped: $left s left" | tee -a "$OUT/steps.txt"; continue; fi
  s0=$(date +%s)
  case $step in
    calibrate) timeout --signal=TERM --kill-after=20 "$left" python3 -m harness calibrate --arm "$ARM" \
                 ${REPEATS:+--repeats "$REPEATS"} --id "$cal_id" ${CALIBRATE_ARGS:-} ;;
    trust) cal_rc=${cal_rc:-$(sed -n 's/^exit //p' "$KEEP/.step-done-$cal_id-calibrate" 2>/dev/null)}
           if [ "${cal_rc:-}" != 2 ]; then echo "trust skipped: calibrate exit ${cal_rc:-not run}"; true
           else
             k=${REPEATS:-5}
             python3 -m harness calibrate --arm "$ARM" --id "$cal_id" --trust "${TRUST:?TRUST=reason}" \
               --from-runs $(for i in $(seq 1 "$k"); do echo "$cal_id-r$i"; done)
           fi ;;
    qualify-*) timeout --signal=TERM --kill-after=20 "$left" python3 -m harness qualify --arm "$ARM" \
                 --run-id "$ARM-$step" ${QUALIFY_ARGS:-} ;;
    batch-invariant)  # an arm of its own judged by $ARM's calibration: `--set` would change the calibration key
             export HARNESS_ARMS_DIR=$KEEP/arms
             [ -d "$KEEP/arms" ] || cp -r configs/arms "$KEEP/arms"
             printf '%s\n' "description: \"$ARM with VLLM_BATCH_INVARIANT=1: a legitimate build\"" "extends: $ARM" \
               "calibration_from: $ARM" "server:" "  env:" "    VLLM_BATCH_INVARIANT: \"1\"" \
               > "$KEEP/arms/$ARM-batch-invariant.yaml"
             timeout --signal=TERM --kill-after=20 "$left" python3 -m harness qualify --arm "$ARM-batch-invariant" \
                 --run-id "$ARM-$step" ${QUALIFY_ARGS:-} ;;
    fault:*|calibrate-fault:*) IFS=: read -r kind fname flen feps <<< "$step"
             export HARNESS_ARMS_DIR=$KEEP/arms
             [ -d "$KEEP/arms" ] || cp -r configs/arms "$KEEP/arms"
             [ -d "$KEEP/lf/$fname" ] || python3 -m harness.faults.length_faults scratch "$fname" --table gpu \
               --site /tmp/site --out "$KEEP/lf/$fname" > "$OUT/scratch-$fname.json" 2>&1 \
               || { cat "$OUT/scratch-$fname.json"; false; }
             variant=$(python3 -m harness.faults.length_faults arm "$fname" --l "$flen" --scratch "$KEEP/lf/$fname" \
               --arms-dir "$KEEP/arms" --base "$ARM" --reference "$(python3 -c "from harness.config.arms import load_arm
print(load_arm('$ARM').reference)")" --pythonpath-tail /tmp/site)
             if [ "$kind" = fault ]; then
               HARNESS_FAULT_EPS=${feps:-0.05} timeout --signal=TERM --kill-after=20 "$left" python3 -m harness qualify \
                 --arm "$variant" --run-id "fault-$fname-$flen${feps:+-$feps}" \
                 --suites "${FAULT_SUITES:-graph_replay,long_context,long_prefix,prefix_reuse,teacher_forcing}"
             else  # the faulty build's own first calibration: no calibration_from, so its float32 anchor judges it
               sed '/^calibration_from:/d' "$KEEP/arms/$variant.yaml" > "$KEEP/arms/$variant-first.yaml"
               HARNESS_FAULT_EPS=${feps:-0.05} timeout --signal=TERM --kill-after=20 "$left" python3 -m harness \
                 calibrate --arm "$variant-first" --id "cal-$fname-$flen${feps:+-$feps}" \
                 ${FAULT_CALIBRATE_ARGS:---suites teacher_forcing}
             fi ;;
    *) echo "unknown step $step"; false ;;
  esac
  rc=$?; [ "$step" = calibrate ] && cal_rc=$rc
  echo "$step exit $rc after $(( $(date +%s) - s0 )) s" | tee -a "$OUT/steps.txt"
  # ended: not cut by the deadline (timeout's 124, a kill's 137); a refused calibrate (2) is ended too, for `trust`
  case $rc in 124|137) ;; *) echo "exit $rc" > "$KEEP/.step-done-$cal_id-$step" ;; esac
done
new=$(cd "$KEEP/reports" && find . -maxdepth 1 -mindepth 1 -type d -newer "$marker" | sed 's|^\./||')
for d in $new; do tail_server_logs "$KEEP/reports/$d"; done
# shellcheck disable=SC2086
[ -n "$new" ] && tar czf "$OUT/runs.tar.gz" -C "$KEEP/reports" $new
# Where each run's time went (benchmarks/repeat_timing.py), every run of this call.
runs_here=$(for d in $new; do [ -f "$KEEP/reports/$d/run.json" ] && echo "$KEEP/reports/$d"; done)
# shellcheck disable=SC2086
[ -n "$runs_here" ] && "$PY" benchmarks/repeat_timing.py $runs_here --json "$OUT/timing.json" | tee "$OUT/timing.md"
(cd "$KEEP/references" 2>/dev/null && find floors -name '*.calibration.json' -o -name '*.source.json' \
   | tar czf "$OUT/calibrations.tar.gz" -T -) 2>/dev/null
cp models/tiny-mla/tiny_model.json "$OUT/" 2>/dev/null
record_versions
save_state
echo "call: $(( $(date +%s) - t0 )) s" | tee "$OUT/call.txt"
bundle_small info
