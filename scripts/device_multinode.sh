#!/usr/bin/env bash
# ON the 2-GPU device (nvidia-h200-x2), from the repository root, after ../shared/gpu's device_install.sh put vLLM
# 0.25.0 in /tmp/site, carrying .gpu-payload/harness, .gpu-payload/gsm8k and .slurm-debs (`make slurm-debs` here):
# a two-"node" arm through the real SLURM launcher -- node1 (GPU 0, HTTP) and node2 (GPU 1, headless) are two slurmd
# on this host, made by scripts/slurm_up.sh from the carried Debian .debs -- qualified against the single-node gpu-tp2
# reference with kv_capacity and the reference checks (prefix_reuse, graph_replay, teacher_forcing).
#
#   bash scripts/device_multinode.sh tp2     # gpu-tp2-2node: TP2 split over the two nodes (first call also makes
#                                            #   the model and captures gpu-tp2's reference under /tmp/keep)
#   bash scripts/device_multinode.sh dcp2    # gpu-dcp2-2node: TP2 + DCP2 split over the two nodes
#
# Writes $OUT/multinode-<which>.txt (plan with vLLM 0.25.0's parser verdict, qualify's tables, squeue afterwards)
# and $OUT/multinode-<which>.tar.gz (the run directory: results.jsonl, server.log of node 0, server-node1.log of the
# headless node, tables). If vLLM 0.25.0 rejects the multi-node argv, `plan` says so and the script stops there.
# Knobs: E2E_EAGER=1 (default: --enforce-eager, ~30 s less start-up), QUALIFY_TIMEOUT_S (default 480).
set -uo pipefail
WHICH=${1:?usage: device_multinode.sh tp2|dcp2}
case "$WHICH" in tp2|dcp2) ;; *) echo "usage: device_multinode.sh tp2|dcp2" >&2; exit 2;; esac
ARM=gpu-$WHICH-2node
RUN=multinode-$WHICH-$(date +%H%M%S)
source scripts/device_lib.sh
device_start
REPORT=$OUT/multinode-$WHICH.txt
: > "$REPORT"
unset SLURM_JOB_ID  # the harness obtains the allocation itself (salloc --nodelist=node1,node2) and cancels it
# A reference store from an earlier device session (carry .device-refs/references.tgz, e.g. the one committed in
# docs/evidence/h200x2-e2e-kill-matrix-2026-11-30/): the single-node gpu-tp2 reference is reused, not captured again.
device_keep "${E2E_KEEP:-/tmp/keep}"
keep_model tiny-mla || exit 3

# slurm_up.sh exits non-zero unless both slurmd came up (a missing library: 5, with its name; a node not ready: 1,
# with each slurmd's log tail): the run stops there instead of waiting for nodes that will never answer.
up=$(SLURM_DEBS=$PWD/.slurm-debs bash scripts/slurm_up.sh 2>&1); up_code=$?
printf '%s\n' "$up" >> "$REPORT"
say "SLURM: $(tail -3 <<<"$up" | tr '\n' ' ')"
if [ "$up_code" != 0 ]; then printf '%s\n' "$up"; say "no SLURM cluster (slurm_up.sh exit $up_code): see $REPORT"; exit 4; fi
sinfo -N >> "$REPORT" 2>&1

say "plan $ARM (vLLM 0.25.0's own parser checks every node's argv)"
python3 -m harness plan --arm "$ARM" >> "$REPORT" 2>&1
plan_code=$?
grep -E "where:|vllm_parses_argv|argv srun" "$REPORT" | cut -c1-400
if [ "$plan_code" != 0 ]; then say "plan refused the arm (exit $plan_code): see $REPORT"; exit "$plan_code"; fi

SET=()
[ "${E2E_EAGER:-1}" = 1 ] && SET+=(--set server.enforce_eager=true)
say "qualify $ARM vs gpu-tp2 (run $RUN)"
timeout --signal=TERM "${QUALIFY_TIMEOUT_S:-480}" python3 -m harness qualify --arm "$ARM" --run-id "$RUN" \
  --suites kv_capacity,prefix_reuse,graph_replay,teacher_forcing "${SET[@]}" > "$KEEP/$RUN.log" 2>&1
code=$?
tail -60 "$KEEP/$RUN.log" >> "$REPORT"
tail -40 "$KEEP/$RUN.log"
say "qualify exit code $code"
say "after the run: squeue jobs [$(squeue -h | tr '\n' ';')] steps [$(squeue -h -s | tr '\n' ';')]"
say "vLLM processes left: $(pgrep -af 'vllm.entrypoints' | grep -v pgrep | wc -l)"
cp "$KEEP/$RUN.log" "${HARNESS_REPORTS_DIR:-reports}/$RUN/" 2>/dev/null
tar czf "$OUT/multinode-$WHICH.tar.gz" -C reports "$RUN" 2>/dev/null
say "done: $REPORT, $OUT/multinode-$WHICH.tar.gz"
exit $code
