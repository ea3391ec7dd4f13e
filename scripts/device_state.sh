#!/usr/bin/env bash
# HERE (the CPU machine), in the repository root: the kept device state between calls and sessions.
#
#   bash scripts/device_state.sh take DIR   # after a device call: its state.tgz / cache.tgz (save_state, in the
#                                           # call's files_at DIR) become .device-refs/'s, for the next call
#   bash scripts/device_state.sh size       # what a call carries: the tracked tree + .device-refs (limit 64 MiB)
#
# .device-refs/ (git-ignored) holds the pinned models (tiny-mla/, copied from models/ by `make device-models`) and
# the state archives; every device call names .device-refs in `carry` (docs/gpu-runs.md, Kept state).
set -euo pipefail
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
    tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
    refs=$(du -sb .device-refs 2>/dev/null | cut -f1 || echo 0)
    echo "tracked tree $(( tracked / 1048576 )) MiB, .device-refs $(( ${refs:-0} / 1048576 )) MiB, together $(( (tracked + ${refs:-0}) / 1048576 )) MiB of 64"
    ;;
  *) echo "usage: device_state.sh take DIR | size" >&2; exit 2 ;;
esac
