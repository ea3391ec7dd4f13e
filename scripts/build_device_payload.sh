#!/usr/bin/env bash
# On this (CPU) machine: what the GPU device needs besides vLLM (../shared/gpu/build_payload.sh brings vLLM).
#   .gpu-payload/harness/*.whl  the harness's Python dependencies the device image lacks (lm-eval and its own),
#                               cp312 wheels, ~13 MB (ruptures: the history's change points, imported by the
#                               report at every qualify's end); everything else (pandas, matplotlib, pytest, NVML, ...) is there
#   .gpu-payload/gsm8k/         a transport copy of the local GSM8K files (git-ignored; the device has no network)
# Carry both with the last vLLM part: see scripts/device_qualify.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(ls /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | head -1 || true)
PY=${PY:-$(command -v python3.12)}
DEST=.gpu-payload/harness
mkdir -p "$DEST" .gpu-payload/gsm8k
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any"
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps $PLAT -d "$DEST" lm_eval==0.4.13 datasets==5.2.0 evaluate==0.4.6 \
  multiprocess==0.70.19 pytablewriter==1.2.1 DataProperty==1.1.1 mbstrdecoder==1.1.5 pathvalidate==3.3.1 \
  tabledata==1.3.5 tcolorpy==0.1.7 typepy==1.3.5 chardet==6.0.0.post1 nltk==3.10.4 more-itertools==11.2.1 \
  tenacity==9.2.1 pytest-xdist==3.8.0 execnet==2.1.2 ruptures==1.1.10
# Published as source only: built here into pure-Python wheels.
"$PY" -m pip wheel -q --no-deps -w "$DEST" rouge_score==0.1.2 sqlitedict==2.1.0 word2number==1.1
rm -f "$DEST"/*.tar.gz "$DEST"/*.zip
GSM8K=${HARNESS_GSM8K_DIR:-../shared/data/gsm8k}
cp "$GSM8K"/train.jsonl "$GSM8K"/test.jsonl .gpu-payload/gsm8k/
du -sh "$DEST" .gpu-payload/gsm8k
