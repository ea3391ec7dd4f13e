# The one device library: sourced by every scripts/device_*.sh, ON the GPU device machine, from the repository root,
# after ../shared/gpu's device_install.sh put vLLM 0.25.0 in /tmp/site. What each job would otherwise repeat: the
# environment, the harness wheel, $OUT and a timed log line, the kept directory (reference store, models) across the
# calls of one warm machine, the tiny models, and packing a run into $OUT. A job is its own steps between these.
#
#   source scripts/device_lib.sh
#   device_start            # environment, harness wheel, OUT (default /tmp/out), t0, say
#   device_keep /tmp/keep   # KEEP: the state a call leaves for the next (restored from .device-refs/state.tgz)
#   keep_model tiny-mla     # the CPU-generated model carried in .device-refs/tiny-mla, checked against its pin
#   for m in $(arm_models $ARMS); do keep_model "$m" || exit 3; done   # every model the arms serve
#   ... the job's qualify/benchmark steps ...
#   pack_run "$RUN" e2e-x   # reports/$RUN (server logs cut) as $OUT/e2e-x.tar.gz
#   save_state              # $KEEP's state as $OUT/state.tgz (+ $OUT/cache.tgz): copy both into .device-refs/
#
# State that survives the machine (docs/gpu-runs.md, Kept state): .device-refs/ here holds the pinned models and
# state.tgz (the reference store with its floors, calibrations and confirmations, and the calibration repeats' run
# directories) and cache.tgz (vLLM's, Inductor's and Triton's compile caches). Every call carries .device-refs,
# device_keep restores it into $KEEP, save_state writes it back to $OUT, and `bash scripts/device_state.sh take DIR`
# here copies what came back into .device-refs/ for the next call, in this session or a later one.
#
# Dry runs on a CPU machine: HARNESS_SERVER_PYTHON and PY point at the CPU environment; no wheel, no install.

# NVLink multicast stays off on these machines (it can take shared GPUs down); flashinfer is not carried.
device_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0
  HSITE=${HSITE:-/tmp/hsite}
  export PYTHONPATH=${DEVICE_SITE:-/tmp/site}:$HSITE:$PWD
  export HARNESS_SERVER_PYTHON=${HARNESS_SERVER_PYTHON:-python3}
  export HARNESS_GSM8K_DIR=${HARNESS_GSM8K_DIR:-$PWD/.gpu-payload/gsm8k}
  PY=${PY:-python3}
  if [ ! -f "$HSITE/.installed" ] && ls .gpu-payload/harness/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target "$HSITE" .gpu-payload/harness/*.whl \
      && touch "$HSITE/.installed"
  fi
}

# device_start: the environment, $OUT created, the job's clock (t0) and `say`.
device_start() {
  device_env
  OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT" models
  t0=$(date +%s)
}

# say TEXT: one line with the seconds since device_start; also appended to $REPORT where a job names one.
say() {
  local line="[$(( $(date +%s) - t0 ))s] $*"
  echo "$line"
  if [ -n "${REPORT:-}" ]; then echo "$line" >> "$REPORT"; fi
}

# device_keep DIR: what outlives one call (models, the reference store, floors, calibration repeats, compile caches).
# A state brought back by an earlier call (.device-refs/state.tgz, cache.tgz: save_state) is restored into an empty
# DIR (an old references.tgz too); the compile caches and the reports of calibrate/qualify live under DIR.
device_keep() {
  KEEP=$1
  export HARNESS_REFERENCE_DIR=$KEEP/references HARNESS_REPORTS_DIR=$KEEP/reports
  export VLLM_CACHE_ROOT=$KEEP/cache/vllm TORCHINDUCTOR_CACHE_DIR=$KEEP/cache/inductor \
    TRITON_CACHE_DIR=$KEEP/cache/triton
  mkdir -p "$KEEP/references" "$KEEP/reports" "$KEEP/cache"
  local f
  for f in state.tgz cache.tgz references.tgz; do  # each once per machine: later calls keep what they wrote
    if [ -f ".device-refs/$f" ] && [ ! -f "$KEEP/.restored-$f" ]; then
      tar xzf ".device-refs/$f" -C "$KEEP" && touch "$KEEP/.restored-$f" && echo "restored .device-refs/$f"
    fi
  done
}

# keep_model NAME: the pinned model NAME (configs/models/NAME.yaml), carried from this CPU machine as
# .device-refs/NAME, copied into $KEEP/NAME once, linked as models/NAME, its files checked against the pin (one
# message and exit 3 on a mismatch: a model made on a GPU depends on the GPU kind) and, once per machine, the MLA
# model with its retrieval circuit (arch deepseek_v3) measured in bf16 on the GPU (harness/tinymodel/verify.py:
# retrieval at every grid length, the median top-2 gap; refused below 0.9 / 0.2); the draft (its circuit is for CPU
# lengths) and the MTP model (none) are checked against their pins only. Models are never generated here: generate
# on CPU and write the pin (docs/gpu-runs.md).
keep_model() {
  local name=$1 dir=$KEEP/$1
  if [ ! -f "$dir/config.json" ]; then
    if [ ! -f ".device-refs/$name/config.json" ]; then
      echo "error: no .device-refs/$name: generate $name on CPU (make device-models) and carry .device-refs/$name" >&2
      return 3
    fi
    cp -r ".device-refs/$name" "$dir"
  fi
  local line
  line=$("$PY" -m harness.tinymodel.pin check "$dir" --name "$name" ${MODEL_PIN_DIR:+--pin-dir "$MODEL_PIN_DIR"} 2>&1) \
    || { echo "$line" | tee -a "$OUT/model.txt" >&2; return 3; }
  echo "$line" | tee -a "$OUT/model.txt"
  local arch
  arch=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("arch"))' "$dir/tiny_model.json" \
    2>/dev/null)
  if [ "$arch" = deepseek_v3 ] && [ ! -f "$dir.verified" ] && [ "${VERIFY_MODEL:-1}" = 1 ]; then
    line=$("$PY" -m harness.tinymodel.verify "$dir" ${VERIFY_LENGTHS:+--lengths "$VERIFY_LENGTHS"} 2>&1 \
      > "$dir.verify.json") || { echo "$line" | tail -5 | tee -a "$OUT/model.txt" >&2; return 3; }
    echo "$line" | tail -1 | tee -a "$OUT/model.txt"
    touch "$dir.verified"
  fi
  cp "$dir.verify.json" "$OUT/$name.verify.json" 2>/dev/null
  mkdir -p models
  [ "$(readlink -f "models/$name")" = "$(readlink -f "$dir")" ] || { rm -rf "models/$name"; ln -s "$dir" "models/$name"; }
}

# arm_models ARM...: the models the arms and their references serve (model.path and speculative.model under
# models/), each once, one a line: what a job keeps with keep_model and carries as .device-refs/NAME. Exit 2 with one
# line on an unknown arm.
arm_models() {
  "$PY" - "$@" <<'PY'
import sys

from harness.config.arms import load_arm
from harness.config.errors import HarnessError

names = []
try:
    arms = [load_arm(name, geometry=False) for name in sys.argv[1:]]
    arms += [load_arm(arm.reference, geometry=False) for arm in arms if arm.reference]
except HarnessError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
for arm in arms:
    for path in (arm.model.path, arm.speculative.model if arm.speculative else None):
        if path and path.startswith("models/") and path[len("models/"):] not in names:
            names.append(path[len("models/"):])
print("\n".join(names))
PY
}

# start_cpu_generation NAME [ARCH]: generate NAME on this machine's CPU (the generator's deterministic CPU path,
# harness/tinymodel) into $KEEP/NAME in the background (setsid: it outlives this call while the machine stays warm),
# when neither .device-refs/NAME nor $KEEP/NAME holds it. For a session without a pinned model yet: start it in the
# first install call; await_cpu_generation in the job call. Log: $KEEP/NAME.gen.log.
start_cpu_generation() {
  local name=$1 arch=${2:-deepseek_v3}
  if [ -f ".device-refs/$name/config.json" ] || [ -f "$KEEP/$name/config.json" ] || [ -f "$KEEP/$name.gen.pid" ]; then
    return 0
  fi
  # Its own copy of the generator and the text: the next call replaces the repository copy (and drops a path it
  # does not carry) while the generation runs on.
  mkdir -p "$KEEP/gen-src/harness"
  cp harness/__init__.py "$KEEP/gen-src/harness/" && cp -r harness/tinymodel "$KEEP/gen-src/harness/"
  cp "$HARNESS_GSM8K_DIR/train.jsonl" "$KEEP/gen-train.jsonl"
  (cd "$KEEP" && PYTHONPATH=$KEEP/gen-src setsid nohup "$PY" -m harness.tinymodel --arch "$arch" --device cpu \
    --out "$KEEP/$name.gen" --gsm8k-train "$KEEP/gen-train.jsonl" > "$KEEP/$name.gen.log" 2>&1 < /dev/null &
   echo $! > "$KEEP/$name.gen.pid")
  say "generating $name ($arch) on CPU in the background, pid $(cat "$KEEP/$name.gen.pid")"
}

# await_cpu_generation NAME [WAIT_S]: wait for start_cpu_generation's model, move it to $KEEP/NAME, and where the
# repository has no pin for it yet, write one into $KEEP/pins (MODEL_PIN_DIR, for keep_model) and $OUT/NAME.yaml
# (commit it as configs/models/NAME.yaml). Exit 3 with the log's tail when the generator failed or refused.
await_cpu_generation() {
  local name=$1 wait_s=${2:-480} t=0
  [ -f "$KEEP/$name/config.json" ] && return 0
  [ -f "$KEEP/$name.gen.pid" ] || { echo "error: no generation of $name was started" >&2; return 3; }
  while [ ! -f "$KEEP/$name.gen/tiny_model.json" ] && pgrep -f -- "--out $KEEP/$name.gen" >/dev/null \
    && [ "$t" -lt "$wait_s" ]; do sleep 5; t=$((t + 5)); done
  if [ ! -f "$KEEP/$name.gen/tiny_model.json" ]; then
    tail -5 "$KEEP/$name.gen.log" >&2
    echo "error: the CPU generation of $name did not finish (waited ${t}s)" >&2
    return 3
  fi
  mv "$KEEP/$name.gen" "$KEEP/$name"
  say "generated $name: $(tail -2 "$KEEP/$name.gen.log" | head -1 | cut -c1-300)"
  if [ ! -f "configs/models/$name.yaml" ]; then
    export MODEL_PIN_DIR=$KEEP/pins
    "$PY" -m harness.tinymodel.pin write "$KEEP/$name" --name "$name" --pin-dir "$MODEL_PIN_DIR" >/dev/null
    cp "$MODEL_PIN_DIR/$name.yaml" "$OUT/$name.yaml"
  fi
}

# return_model NAME: the model's files as $OUT/NAME.tgz.part_* (15 MiB pieces: a file comes back with at most 16):
# here, `cat NAME.tgz.part_* | tar xz -C .device-refs` makes it the carried copy.
return_model() {
  tar czf - -C "$KEEP" "$1" | split -b 15m - "$OUT/$1.tgz.part_"
  say "returned $1: $(ls "$OUT/$1".tgz.part_* | wc -l) pieces"
}

# bundle_small NAME: every file of $OUT under 1 MB, except NAME itself, moved into $OUT/NAME.tgz (at most 8 files
# come back from a call).
bundle_small() {
  local files
  files=$(cd "$OUT" && find . -maxdepth 1 -type f -size -1000k ! -name "$1.tgz" -printf '%P\n')
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086
  (cd "$OUT" && tar czf "$1.tgz" $files && rm -f $files)
}

# tail_server_logs DIR [BYTES]: server logs under DIR cut to their last BYTES (200 kB), so an archive stays small.
tail_server_logs() {
  local keep=${2:-200000}
  find "$1" -name server.log -size +"$(( keep / 1000 ))"k | while read -r log; do
    tail -c "$keep" "$log" > "$log.tail" && mv "$log.tail" "$log"
  done
}

# pack_run RUN NAME [LOG]: $HARNESS_REPORTS_DIR/RUN (device_keep's; else reports/RUN) (with the qualify log LOG beside it, server logs cut) as $OUT/NAME.tar.gz.
pack_run() {
  local run=$1 name=$2 log=${3:-}
  local reports=${HARNESS_REPORTS_DIR:-reports}
  tail_server_logs "$reports/$run" 150000
  if [ -n "$log" ]; then cp "$log" "$reports/$run/" 2>/dev/null; fi
  tar czf "$OUT/$name.tar.gz" -C "$reports" "$run" 2>/dev/null
}

# save_references: $KEEP's reference store (and the e2e floor) as $OUT/references.tgz (older callers; save_state
# brings it back with the rest).
save_references() {
  tar czf "$OUT/references.tgz" -C "$KEEP" references $([ -d "$KEEP/e2e-floor" ] && echo e2e-floor) 2>/dev/null
}

# save_state: what the next call restores (device_keep), as $OUT/state.tgz (the reference store with its floors,
# calibrations and confirmations, the e2e floor, and the run directories of calibration repeats, server logs cut) and
# $OUT/cache.tgz (the compile caches). Each must stay under the 16 MiB a file may come back with: an oversized one
# is dropped with a line saying so (the next call starts without it).
save_state() {
  local runs
  runs=$(cd "$KEEP/reports" 2>/dev/null && ls -d cal* 2>/dev/null)  # every calibration and its repeats (any --id cal*)
  for d in $runs; do tail_server_logs "$KEEP/reports/$d" 100000; done
  # shellcheck disable=SC2046
  tar czf "$OUT/state.tgz" -C "$KEEP" references $([ -d "$KEEP/e2e-floor" ] && echo e2e-floor) \
    $(for d in $runs; do echo "reports/$d"; done) 2>/dev/null
  tar czf "$OUT/cache.tgz" -C "$KEEP" cache 2>/dev/null
  local f
  for f in state.tgz cache.tgz; do
    if [ "$(stat -c %s "$OUT/$f")" -gt $(( 16 * 1024 * 1024 - 4096 )) ]; then
      echo "save_state: $f is $(du -h "$OUT/$f" | cut -f1), over the 16 MiB a file comes back with: dropped" >&2
      rm -f "$OUT/$f"
    else
      echo "save_state: $f $(du -h "$OUT/$f" | cut -f1)"
    fi
  done
}

# record_versions: the GPU, driver, torch, CUDA, vLLM and transformers of this machine, as $OUT/versions.txt.
record_versions() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, vllm, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda); print('vllm', vllm.__version__); print('transformers', transformers.__version__)"
  } > "$OUT/versions.txt" 2>&1
}
