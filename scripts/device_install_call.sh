#!/usr/bin/env bash
# ON the GPU device machine: one install call of ../shared/gpu's payload (carry .gpu-payload/p0 and the call's part),
# and, with GENERATE=1 (the first install call of a session whose model is not carried yet), the pinned-to-be tiny
# MLA model generated on this machine's CPU in the background while the install calls go on (start_cpu_generation;
# carry .gpu-payload/gsm8k too). The job call then waits for it (device_calibrate.sh with AWAIT_MODEL=1).
#
#   bash scripts/device_install_call.sh            # each install call
set -uo pipefail
bash .gpu-payload/p0/device_install.sh || exit $?
# A dependency tree split in parts (deps_tree.tar.xz.part_*, when it does not fit one call beside the tree): put
# together once every part is here (the checksum says so), then installed.
if [ ! -f /tmp/site/.installed ] && ls /tmp/gpu-parts/deps_tree.tar.xz.part_* >/dev/null 2>&1; then
  cat /tmp/gpu-parts/deps_tree.tar.xz.part_* > /tmp/gpu-parts/deps_tree.tar.xz
  bash .gpu-payload/p0/device_install.sh || exit $?
  [ -f /tmp/site/.installed ] || rm -f /tmp/gpu-parts/deps_tree.tar.xz
fi
source scripts/device_lib.sh
device_start
device_keep /tmp/keep
if [ "${GENERATE:-0}" = 1 ]; then start_cpu_generation tiny-mla; fi
[ -f /tmp/keep/tiny-mla.gen.log ] && say "generation: $(tail -c 300 /tmp/keep/tiny-mla.gen.log | tr '\n' ' ')"
nproc; python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"
