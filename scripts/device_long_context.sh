#!/usr/bin/env bash
# ON one H200 (nvidia-h200), from the repository root, after ../shared/gpu's device_install.sh put vLLM 0.25.0 in
# /tmp/site (and, as for device_qualify.sh, .gpu-payload/harness and .gpu-payload/gsm8k are carried): the
# length-dependent faults of harness/faults/length_faults (table gpu) against gpu-mla-120k, in one call.
#
#   bash scripts/device_long_context.sh
#
# 1. the tiny MLA model, generated once per machine (kept in $KEEP with the reference store);
# 2. clean control: `qualify --arm gpu-mla-120k --suites long_context,long_prefix` against gpu-mla-120k-ref, which
#    is launched once and its long_context outputs stored; qualify's exit code is the control's verdict;
# 3. each fault in its own scratch copy of /tmp/site/vllm (links, the edited files real: the installed vLLM is never
#    patched), one faulted arm per L in $LF_LENGTHS (server.env PYTHONPATH=<scratch>:/tmp/site, HARNESS_FAULT_L);
#    one `qualify --arms <fault>@L1,<fault>@L2,...` per fault, the three at once (LF_PARALLEL=0: one after another),
#    each reusing the stored reference outputs (the reference server still starts in each: long_prefix times it);
# 4. the kill matrix (harness/faults/kill_matrix.py --length): fault x L x check.
#
# Tight on purpose (one 600 s call): the candidates run --enforce-eager (LF_EAGER=0 keeps CUDA graphs: +~30 s per
# start), every arm of every run at gpu_memory_utilization $LF_UTIL (the reference's value is part of its store
# key, so it is the same in every run; up to six servers share the GPU), long_prefix with the 120k-token
# long_prefix_120k_tiny_short workload (c1, 2 requests, 64 output tokens). Every step has a timeout (LF_DEADLINE_S
# for the whole script); a fault run that does not finish leaves its checks "not run" in the matrix.
# $OUT: length_kill_matrix.{md,json,csv}, length_runs.json, runs.tar.gz (results, tables, logs cut to their tails),
# verify.txt (each snippet found once in /tmp/site), markers.txt (the patched copies' import lines, per server),
# timings.tsv, tiny_model.json. Knobs: LF_FAULTS, LF_LENGTHS, LF_SUITES, LF_ARM, LF_REF, LF_LONG_PREFIX,
# LF_REQUIRE_RETRIEVAL=0 (keep a model whose circuit does not retrieve, without it), LF_CIRCUIT=0 (the trained model
# without the circuit at all: a control of the circuit's bf16 noise, scripts/device_circuit_control.sh); LF_CONTROL=0
# keeps the control of an earlier call on the same warm machine (control in one call, faults in the next).
# LF_CONTROL_SUITES=long_context,long_prefix,prefix_reuse,teacher_forcing also runs today's checks on the control
# (~+60 s): the kill matrix then reads their reach (checked_to_tokens) and marks them "missed (checks to N < L)"
# under each fault they cannot reach (every fault is the identity below L). With graph_replay among them the control
# keeps the arm's eager variant (LF_EAGER_ARM, default $LF_ARM-eager, at $LF_UTIL); with LF_EAGER=0 (CUDA graphs) the
# control is every check of the arm: docs/evidence/h200-2026-12-03b.md ran it, exit 0 in 416 s.
# CPU dry run of this script (here, one fault, one L, serial): PY=.venv/bin/python LF_TABLE=cpu LF_MODEL=0
#   LF_SITE=$(ls -d .venv-server/lib/python3*/site-packages) HARNESS_SERVER_PYTHON=.venv-server/bin/python
#   LF_ARM=cpu-smoke LF_REF=cpu-ref LF_LONG_PREFIX=long_prefix_cpu LF_UTIL=0.3 LF_LENGTHS=2048 LF_PARALLEL=0
#   LF_FAULTS=keys_past_L_ignored LF_DEADLINE_S=1500 LF_CONTROL_S=900 LF_PYTHONPATH=$PWD LF_KEEP=/tmp/lf-keep
#   OUT=/tmp/lf-dry bash scripts/device_long_context.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
KEEP=${LF_KEEP:-/tmp/keep}
ARM=${LF_ARM:-gpu-mla-120k}
REF=${LF_REF:-gpu-mla-120k-ref}
LENGTHS=${LF_LENGTHS:-24000 64000 100000}
FAULTS=${LF_FAULTS:-keys_past_L_ignored rope_offset_past_L precision_loss_past_L}
[ "$FAULTS" = none ] && FAULTS=""  # the control alone
SUITES=${LF_SUITES:-long_context,long_prefix}
UTIL=${LF_UTIL:-0.15}
LP=${LF_LONG_PREFIX:-long_prefix_120k_tiny_short}
DEADLINE_S=${LF_DEADLINE_S:-570}
SITE=${LF_SITE:-/tmp/site}
PY=${PY:-python3}
TABLE=${LF_TABLE:-gpu}
DEVICE_SITE=$SITE
source scripts/device_lib.sh
device_start
if [ -n "${LF_PYTHONPATH:-}" ]; then export PYTHONPATH=$LF_PYTHONPATH; fi
device_keep "$KEEP"
export HARNESS_ARMS_DIR=$KEEP/arms
mkdir -p "$KEEP/runs"
START=$t0
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
printf 'step\tseconds\trc\n' > "$OUT/timings.tsv"
timed() {  # timed NAME LIMIT LOG CMD...: never longer than the deadline allows; seconds and rc to timings.tsv
  local name=$1 limit=$2 log=$3 s0 rc; shift 3; s0=$(date +%s)
  (( limit > $(left) - 10 )) && limit=$(( $(left) - 10 ))
  if (( limit < 20 )); then printf '%s\t0\tnot-run(deadline)\n' "$name" >> "$OUT/timings.tsv"; return 124; fi
  timeout --signal=TERM --kill-after=15 "$limit" "$@" > "$log" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$(( $(date +%s) - s0 ))" "$rc" >> "$OUT/timings.tsv"
  say "$name: rc $rc in $(( $(date +%s) - s0 )) s"
  return $rc
}

if [ "${LF_MODEL:-1}" = 1 ]; then
  if [ ! -f "$KEEP/tiny-mla/config.json" ]; then
    # A model whose retrieval circuit falls short stops the call (no device time spent on it); LF_REQUIRE_RETRIEVAL=0
    # saves it without the circuit instead (--keep-weak-retrieval), judged on exact match, drift and teacher forcing
    # alone, and tiny_model.json's retrieval_problems says why (printed below).
    model_flags=(); [ "${LF_REQUIRE_RETRIEVAL:-1}" = 0 ] && model_flags=(--keep-weak-retrieval)
    [ "${LF_CIRCUIT:-1}" = 0 ] && model_flags=(--without-retrieval-circuit)  # the circuit's control (no needles)
    timed model 300 "$KEEP/tiny-mla.log" $PY -m harness.tinymodel --arch deepseek_v3 --device cuda \
      --out "$KEEP/tiny-mla" --gsm8k-train "$HARNESS_GSM8K_DIR/train.jsonl" "${model_flags[@]}" \
      || { tail -30 "$KEEP/tiny-mla.log"; cp "$KEEP/tiny-mla.log" "$OUT/"; exit 3; }
    cp "$KEEP/tiny-mla.log" "$OUT/"
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print('tiny-mla retrieval', d.get('retrieval_accuracy', d.get('retrieval_accuracy_of_circuit')), \
      'problems', d.get('retrieval_problems', 'none'))" "$KEEP/tiny-mla/tiny_model.json"
  fi
  [ -L models/tiny-mla ] || rm -rf models/tiny-mla
  ln -sfn "$KEEP/tiny-mla" models/tiny-mla
  cp "$KEEP/tiny-mla/tiny_model.json" "$OUT/" 2>/dev/null
fi

LFP="$PY -m harness.faults.length_faults"
$LFP verify --table "$TABLE" --source "$SITE" > "$OUT/verify.txt" 2>&1 || { cat "$OUT/verify.txt"; exit 4; }
rm -rf "$KEEP/arms" && cp -r configs/arms "$KEEP/arms"
declare -A FAULT_ARMS
runs_json="$KEEP/length_runs.entries"; : > "$runs_json"
for f in $FAULTS; do
  $LFP scratch "$f" --table "$TABLE" --site "$SITE" --out "$KEEP/lf/$f" > "$OUT/scratch-$f.json" 2>&1 \
    || { cat "$OUT/scratch-$f.json"; exit 4; }
  for l in $LENGTHS; do
    a=$($LFP arm "$f" --l "$l" --scratch "$KEEP/lf/$f" --arms-dir "$KEEP/arms" --base "$ARM" --reference "$REF" \
        --pythonpath-tail "$SITE")
    FAULT_ARMS[$f]="${FAULT_ARMS[$f]:+${FAULT_ARMS[$f]},}$a"
    echo "{\"fault\": \"$f\", \"length\": $l, \"arm\": \"$a\", \"run_dir\": \"runs/$f\"}" >> "$runs_json"
  done
done

COMMON=(--no-vllm-check --set "workloads.long_prefix=$LP"
        --set "server.gpu_memory_utilization=$UTIL" --set "$REF:server.gpu_memory_utilization=$UTIL")
[ "${LF_EAGER:-1}" = 1 ] && COMMON+=(--set server.enforce_eager=true)
CONTROL_SUITES=${LF_CONTROL_SUITES:-$SUITES}
# graph_replay compares the arm with its eager variant, so a control that runs it keeps that arm (at the same
# utilization); everywhere else the variant is left out (one server less per run).
if [[ ",$CONTROL_SUITES," == *,graph_replay,* ]]; then
  CONTROL_ARGS=("${COMMON[@]}" --set "${LF_EAGER_ARM:-$ARM-eager}:server.gpu_memory_utilization=$UTIL")
else
  CONTROL_ARGS=("${COMMON[@]}" --set eager_variant=null)
fi
COMMON+=(--set eager_variant=null)
if [ "${LF_CONTROL:-1}" = 1 ]; then
  rm -rf "$KEEP/runs"/*
  say "clean control: $ARM vs $REF ($CONTROL_SUITES)"
  timed control "${LF_CONTROL_S:-300}" "$KEEP/runs/control.log" $PY -m harness qualify --arm "$ARM" \
    --run-dir "$KEEP/runs/control" --suites "$CONTROL_SUITES" "${CONTROL_ARGS[@]}"
  control_rc=$?
  echo "$control_rc" > "$KEEP/control_rc"
  tail -8 "$KEEP/runs/control.log"
else  # LF_CONTROL=0: a later call on the same machine keeps the control an earlier call ran (and its exit code)
  find "$KEEP/runs" -mindepth 1 -maxdepth 1 ! -name 'control*' -exec rm -rf {} +
  control_rc=$(cat "$KEEP/control_rc" 2>/dev/null || echo 124)
  say "control kept from an earlier call: exit $control_rc"
fi

pids=()
for f in $FAULTS; do
  timed "fault:$f" "$(left)" "$KEEP/runs/$f.log" $PY -m harness qualify --arms "${FAULT_ARMS[$f]}" \
    --run-dir "$KEEP/runs/$f" --suites "$SUITES" "${COMMON[@]}" &
  pids+=("$!")
  if [ "${LF_PARALLEL:-1}" = 1 ]; then sleep "${LF_STAGGER_S:-20}"; else wait "$!"; fi
done
declare -A RC
i=0; for f in $FAULTS; do wait "${pids[$i]}"; RC[$f]=$?; i=$((i + 1)); done

$PY - "$KEEP" "$ARM" "$control_rc" "$runs_json" "$(for f in $FAULTS; do echo "$f=${RC[$f]}"; done)" <<'PY'
import json, re, sys
from pathlib import Path
keep, arm, control_rc, entries, rcs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
rc = dict(x.split("=") for x in rcs.split())
def verdicts(run):
    note = keep / run / "annotation.md"
    text = note.read_text() if note.is_file() else ""
    return {m.group(1): m.group(2) for m in re.finditer(r"^- (\S+) vs \S+: (.+)$", text, re.M)}
runs = [{"fault": None, "length": None, "arm": arm, "run_dir": "runs/control", "exit_code": control_rc,
         "verdict": verdicts("runs/control").get(arm)}]
for line in Path(entries).read_text().splitlines():
    e = json.loads(line)
    runs.append({**e, "exit_code": int(rc.get(e["fault"], -1)), "verdict": verdicts(e["run_dir"]).get(e["arm"])})
(keep / "length_runs.json").write_text(json.dumps({"runs": runs}, indent=1))
PY
$PY -m harness.faults.kill_matrix "$KEEP" --length > "$OUT/kill_matrix.log" 2>&1
cat "$OUT/kill_matrix.log"
cp "$KEEP"/length_kill_matrix.* "$KEEP/length_runs.json" "$OUT/" 2>/dev/null
grep -h "\[length-fault\]" "$KEEP"/runs/*/*/server.log > "$OUT/markers.txt" 2>/dev/null
for log in "$KEEP"/runs/*/*/server.log; do
  [ -f "$log" ] && tail -c 100000 "$log" > "$log.tail" && mv "$log.tail" "$log"
done
tar czf "$OUT/runs.tar.gz" -C "$KEEP" runs length_runs.json 2>/dev/null
say "done: control qualify exit $control_rc; faults: $(for f in $FAULTS; do printf '%s=%s ' "$f" "${RC[$f]}"; done)"
exit "$control_rc"
