#!/usr/bin/env bash
# HERE (the CPU machine), in the repository root: the kept device state between calls and sessions.
#
#   bash scripts/device_state.sh take DIR   # after a device call: its state.tgz / cache.tgz (save_state, in the
#                                           # call's files_at DIR) become .device-refs/'s, for the next call
#   bash scripts/device_state.sh size       # what a call carries: the tracked tree + .device-refs (limit 64 MiB)
#   bash scripts/device_state.sh size PATH...   # the tracked tree + these carried paths (one call's carry list)
#   bash scripts/device_state.sh models     # every pinned model (configs/models/NAME.yaml) into .device-refs/NAME
#
# .device-refs/ (git-ignored) holds the pinned models (copied from models/ by `make device-models`, each checked
# against its pin; a carried copy that passes is kept) and the state archives; device calls name in `carry` what they
# need of it (docs/gpu-runs.md, Kept state).
set -euo pipefail
PY=${PY:-.venv/bin/python}
case ${1:-} in
  take)
    src=${2:?usage: device_state.sh take DIR}
    mkdir -p .device-refs
    found=0
    for f in state.tgz cache.tgz references.tgz; do
      if [ -f "$src/$f" ]; then cp "$src/$f" ".device-refs/$f"; echo "took $f ($(du -h "$src/$f" | cut -f1))"; found=1; fi
    done
    if [ "$found" = 0 ]; then echo "error: no state.tgz, cache.tgz or references.tgz in $src (did the call run save_state?)" >&2; exit 2; fi
    ;;
  size)
    shift
    [ $# -gt 0 ] || set -- .device-refs
    tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    total=$tracked
    line="tracked tree $(( tracked / 1048576 )) MiB"
    for path in "$@"; do
      [ -e "$path" ] || { echo "error: $path not found: nothing to carry" >&2; exit 2; }
      n=$(du -sb "$path" | cut -f1)
      total=$(( total + n ))
      line+=", $path $(awk "BEGIN {printf \"%.1f\", $n / 1048576}") MiB"
    done
    echo "$line; together $(awk "BEGIN {printf \"%.1f\", $total / 1048576}") MiB of 64"
    [ "$total" -le $(( 64 * 1048576 )) ] || { echo "error: over the 64 MiB a call carries" >&2; exit 3; }
    ;;
  models)
    code=0
    for pin in configs/models/*.yaml; do
      name=$(basename "$pin" .yaml)
      if "$PY" -m harness.tinymodel.pin check ".device-refs/$name" --name "$name" >/dev/null 2>&1; then
        echo "kept .device-refs/$name ($(du -sh ".device-refs/$name" | cut -f1), pinned)"
      elif "$PY" -m harness.tinymodel.pin check "models/$name" --name "$name"; then
        rm -rf ".device-refs/$name" && mkdir -p .device-refs && cp -r "models/$name" ".device-refs/$name"
        rm -f ".device-refs/$name/.ready"  # make's marker, not the model
        echo "copied models/$name to .device-refs/$name ($(du -sh ".device-refs/$name" | cut -f1))"
      else
        echo "error: neither .device-refs/$name nor models/$name is the pinned $name:" \
          "$(grep -m1 '^generate:' "$pin")" >&2
        code=3
      fi
    done
    exit $code
    ;;
  *) echo "usage: device_state.sh take DIR | size [PATH...] | models" >&2; exit 2 ;;
esac
