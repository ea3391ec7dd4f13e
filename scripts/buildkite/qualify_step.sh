#!/usr/bin/env bash
# One Buildkite step of `python -m harness pipeline`: qualify an arm group (its candidates in one run, a shared
# reference started once), annotate the build from the run's annotation.md, exit with qualify's code. The agent
# uploads reports/$HARNESS_RUN_ID/** afterwards (artifact_paths), also when this fails.
#   env from the pipeline: HARNESS_RUN_ID, HARNESS_ARMS (the group's candidates, comma-separated),
#   [HARNESS_BASELINE_FROM=previous-nightly], [HARNESS_PARALLEL=1]
#   previous nightly: BUILDKITE_API_TOKEN (read_builds scope) to find it, or NIGHTLY_BASELINE_BUILD=<build id>
#   [HARNESS_HISTORY_CHECK=1 HARNESS_HISTORY=<store>]: nightly: the previous nightly's store fetched when absent
#   (or, where it has none, the newest of the 9 nightlies before it that has one, said in the annotation),
#   the run appended (qualify does) and `harness history check` run on it; a lasting change it finds fails the
#   step (its lines go into the annotation); "NOT JUDGED" (too few runs: exit 3) colours it a warning, not a
#   failure. A store that is neither here nor fetched fails the step before qualify, said in the annotation: a
#   history silently restarted at one run would judge nothing for nights. A store outside reports/ is a shared path
#   (`pipeline --history PATH`): never uploaded, so never fetched; missing, it fails the same way.
#   [HARNESS_HISTORY_RESET=<reason>]: start the group's history anew tonight (the very first night, a lost store)
#   where there is none to continue: the previous nightly's store is still fetched first, and only where that fails
#   (or no previous nightly exists, or a shared store is missing) does the night start a new one; the annotation says
#   which happened. Set for one build (`pipeline --history-reset`, or the build's env)
#   HARNESS_QUALIFY_ARGS: extra arguments for qualify (and the dry run's plan), e.g. "--set model.path=/models/x"
#   HARNESS_DRY_RUN=1: print what would run and run `harness plan --arms` on the group instead (CI checks every
#   step so)
set -uo pipefail
cd "$(dirname "$0")/../.."
HARNESS_ARMS=${HARNESS_ARMS:-${HARNESS_ARM:-}}  # HARNESS_ARM: a pipeline emitted before groups had several
: "${HARNESS_RUN_ID:?set by the pipeline}" "${HARNESS_ARMS:?set by the pipeline}"
group=${HARNESS_ARMS//,/_}  # the group's name in run ids and the annotation context (harness.nightly.pipeline)
PY=${HARNESS_PYTHON:-.venv/bin/python}
DRY=${HARNESS_DRY_RUN:-0}
run() { if [ "$DRY" = 1 ]; then echo "would run: $*"; else "$@"; fi; }

baseline_args=()
prev_id="" prev_num=""
history_builds=()  # "<id> <number>" of the builds to fetch the history store from, newest first
if [ "${HARNESS_BASELINE_FROM:-}" = previous-nightly ]; then
  prev_id=${NIGHTLY_BASELINE_BUILD:-}
  prev_num=${NIGHTLY_BASELINE_NUMBER:-}
  if [ -n "$prev_id" ]; then
    history_builds=("$prev_id $prev_num")  # named by hand: that build only
  elif [ -n "${BUILDKITE_API_TOKEN:-}" ]; then
    api="https://api.buildkite.com/v2/organizations/${BUILDKITE_ORGANIZATION_SLUG}/pipelines/${BUILDKITE_PIPELINE_SLUG}"
    # every earlier nightly (at most 10): a night whose fetch failed uploaded no store, the one before may have it
    mapfile -t history_builds < <(curl -sf -H "Authorization: Bearer ${BUILDKITE_API_TOKEN}" \
        "${api}/builds?branch=${BUILDKITE_BRANCH}&per_page=50" \
        | "$PY" -m harness.nightly.previous --all "${BUILDKITE_BUILD_NUMBER}")
    read -r prev_id prev_num <<< "${history_builds[0]:-}"
  fi
  if [ -n "$prev_id" ] && [ -n "$prev_num" ]; then
    prev_run="nightly-${prev_num}-${group}"
    # results.jsonl alone is enough: its long-prefix records carry the per-request TPOT samples
    if run buildkite-agent artifact download "reports/${prev_run}/results.jsonl" baseline/ --build "$prev_id"; then
      baseline_args=(--baseline "baseline/reports/${prev_run}/results.jsonl")
    else
      echo "no baseline: the previous nightly (build ${prev_num}) has no reports/${prev_run}/results.jsonl"
    fi
  else
    echo "no baseline: no previous nightly found (set BUILDKITE_API_TOKEN or NIGHTLY_BASELINE_BUILD/_NUMBER)"
  fi
fi

# The group's history so far: here (a shared path), or the previous nightly's artifact; without it the step fails
# before qualify (a history silently restarted at one run judges nothing), unless a reset says why it starts anew.
# A reset never skips the fetch: resetting one group must not throw away another's history that can be fetched.
history_note=""
if [ "${HARNESS_HISTORY_CHECK:-0}" = 1 ]; then
  : "${HARNESS_HISTORY:?set by the pipeline with HARNESS_HISTORY_CHECK}"
  reset=${HARNESS_HISTORY_RESET:-}
  case "$HARNESS_HISTORY" in reports/*) shared="" ;; *) shared=1 ;; esac  # the pipeline's artifact is reports/...
  missing=""
  if [ -f "$HARNESS_HISTORY" ]; then
    [ -n "$reset" ] && history_note="HARNESS_HISTORY_RESET is set but $HARNESS_HISTORY is \
here: nothing was reset (move the file aside to start anew)."
  elif [ -n "$shared" ]; then
    missing="the shared store $HARNESS_HISTORY (pipeline --history) is not there (an unmounted filesystem?)"
  elif [ -z "$prev_id" ]; then
    missing="$HARNESS_HISTORY is not here and no previous nightly build was found to fetch it from \
(BUILDKITE_API_TOKEN, or NIGHTLY_BASELINE_BUILD and NIGHTLY_BASELINE_NUMBER, name it)"
  else
    fetched="" none=()  # the build the store came from; the newer ones that had none
    for build in "${history_builds[@]}"; do
      read -r id num <<< "$build"
      if run buildkite-agent artifact download "$HARNESS_HISTORY" . --build "$id" \
         && { [ "$DRY" = 1 ] || [ -f "$HARNESS_HISTORY" ]; }; then
        fetched=${num:-$id}
        break
      fi
      none+=("${num:-$id}")
    done
    had_none="build ${none[0]:-}"
    [ "${#none[@]}" -gt 1 ] && had_none="builds ${none[0]}..${none[-1]}"
    if [ -z "$fetched" ]; then
      missing="$HARNESS_HISTORY is not here and the previous nightly's artifact (build ${prev_num:-$prev_id}) could \
not be downloaded"
      [ "${#none[@]}" -gt 1 ] && missing="$missing, nor that of the earlier nightlies ($had_none had none)"
    elif [ "${#none[@]}" -gt 0 ]; then
      history_note="Nightly history store fetched from build ${fetched}: ${had_none} had none."
    fi
    if [ -n "$fetched" ] && [ -n "$reset" ]; then
      store="the previous nightly's store (build ${fetched})"
      [ "${#none[@]}" -gt 0 ] && store="the store of build ${fetched} (${had_none} had none)"
      history_note="HARNESS_HISTORY_RESET is set (${reset}) but ${store} was fetched: nothing was reset, the history \
goes on (a reset starts anew only where there is no store to continue)."
    fi
  fi
  if [ -n "$missing" ] && [ -n "$reset" ]; then
    history_note="History reset (HARNESS_HISTORY_RESET): ${reset}. Nothing to continue: ${missing}. This night starts \
a new store, $HARNESS_HISTORY: the nightly check has no earlier runs to judge against."
  elif [ -n "$missing" ]; then
    if [ -n "$shared" ]; then
      what="not found" todo="Mount the filesystem (or correct pipeline --history) and retry the step"
    else
      what="not fetched"
      todo="Retry the step, name the build that holds the store (NIGHTLY_BASELINE_BUILD and NIGHTLY_BASELINE_NUMBER)"
    fi
    msg="Nightly history ${what}: ${missing}. Not qualified: the history would silently restart at one run. \
${todo}, or start anew on purpose with a build whose env has HARNESS_HISTORY_RESET=<reason> (the first night needs \
it; \`python -m harness pipeline --nightly --history-reset REASON\` sets it)."
    echo "error: $msg" >&2
    run buildkite-agent annotate --context "qualify-${group}" --style error "### qualify ${group}: $msg" \
      || echo "warning: buildkite-agent annotate failed"
    exit 1
  fi
  [ -n "$history_note" ] && echo "$history_note"
fi

parallel_args=()
[ "${HARNESS_PARALLEL:-0}" = 1 ] && parallel_args=(--parallel)
read -r -a extra_args <<< "${HARNESS_QUALIFY_ARGS:-}"

if [ "$DRY" = 1 ]; then
  echo "would run: $PY -m harness qualify --arms $HARNESS_ARMS --run-id $HARNESS_RUN_ID ${parallel_args[*]}" \
       "${baseline_args[*]} ${extra_args[*]}"
  # the group's preflight: each candidate, its references (a shared one once) and the shared workloads; not
  # strict: this machine is not the GPU host the step runs on
  CI= "$PY" -m harness plan --arms "$HARNESS_ARMS" --no-vllm-check "${extra_args[@]}"
  code=$?
  [ "${HARNESS_HISTORY_CHECK:-0}" = 1 ] && echo "would run: $PY -m harness history check --run $HARNESS_RUN_ID" \
    "(store $HARNESS_HISTORY)"
  exit $code
fi
"$PY" -m harness qualify --arms "$HARNESS_ARMS" --run-id "$HARNESS_RUN_ID" "${parallel_args[@]}" \
  "${baseline_args[@]}" "${extra_args[@]}"
code=$?
note="reports/${HARNESS_RUN_ID}/annotation.md"
if [ "${HARNESS_HISTORY_CHECK:-0}" = 1 ]; then
  check=$("$PY" -m harness history check --run "$HARNESS_RUN_ID" 2>&1)
  check_code=$?
  echo "$check"
  if [ -f "$note" ]; then
    { printf '\n### Nightly history\n\n'; [ -n "$history_note" ] && printf '%s\n\n' "$history_note"
      printf '```\n%s\n```\n' "$check"; } >> "$note"
  fi
  # 3: NOT JUDGED (a series too short for the budget to mean anything): said in the annotation, in its warning
  # colour, and no failure: the first nights after a reset are short by construction
  [ "$check_code" = 3 ] && not_judged=1
  [ "$code" = 0 ] && [ "$check_code" != 0 ] && [ "$check_code" != 3 ] && code=1
fi
if [ -f "$note" ]; then
  style=success; [ "${not_judged:-0}" = 1 ] && style=warning; [ "$code" = 0 ] || style=error
  buildkite-agent annotate --context "qualify-${group}" --style "$style" < "$note" \
    || echo "warning: buildkite-agent annotate failed"
else
  echo "no annotation: $note was not written (qualify exit code $code)"
fi
exit "$code"
