# The one device library: sourced by every scripts/device_*.sh, ON the GPU device machine, from the repository root,
# after ../shared/gpu's device_install.sh put vLLM 0.25.0 in /tmp/site. What each job would otherwise repeat: the
# environment, the harness wheel, $OUT and a timed log line, the kept directory (reference store, models) across the
# calls of one warm machine, the tiny models, and packing a run into $OUT. A job is its own steps between these.
#
#   source scripts/device_lib.sh
#   device_start            # environment, harness wheel, OUT (default /tmp/out), t0, say
#   device_keep /tmp/keep   # KEEP, its reference store (restored from .device-refs/references.tgz when empty)
#   keep_model tiny-mla     # generated once into $KEEP, linked as models/tiny-mla
#   ... the job's qualify/benchmark steps ...
#   pack_run "$RUN" e2e-x   # reports/$RUN (server logs cut) as $OUT/e2e-x.tar.gz
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

# device_keep DIR: what outlives one call on the warm machine (models, the reference store, floors). A reference
# store brought back by an earlier session (.device-refs/references.tgz, written by save_references) is restored
# into an empty one: stored references are reused, not captured again.
device_keep() {
  KEEP=$1
  export HARNESS_REFERENCE_DIR=$KEEP/references
  mkdir -p "$KEEP/references"
  if [ -f .device-refs/references.tgz ] && [ -z "$(ls -A "$KEEP/references")" ]; then
    tar xzf .device-refs/references.tgz -C "$KEEP"
  fi
}

# make_tiny_mla DIR LOG [ARCH] [NAME]: the generated tiny model in DIR (kept there while the machine is warm), linked
# as models/NAME (default tiny-mla, arch deepseek_v3). The generator refuses an MLA model whose retrieval circuit
# falls short (copy accuracy < 0.9 at a grid length): measured 1.0 at 1k-122k on one H200
# (docs/evidence/h200-long-context-2026-12-02c.md).
make_tiny_mla() {
  local dir=$1 log=$2 arch=${3:-deepseek_v3} name=${4:-tiny-mla}
  if [ ! -f "$dir/config.json" ]; then
    python3 -m harness.tinymodel --arch "$arch" --device cuda --out "$dir" \
      --gsm8k-train "$HARNESS_GSM8K_DIR/train.jsonl" > "$log" 2>&1 || { tail -30 "$log"; cp "$log" "$OUT/" 2>/dev/null; return 3; }
  fi
  mkdir -p models
  [ "$(readlink -f "models/$name")" = "$(readlink -f "$dir")" ] || { rm -rf "models/$name"; ln -s "$dir" "models/$name"; }
}

# keep_model NAME [ARCH]: make_tiny_mla into $KEEP/NAME (device_keep first), linked as models/NAME.
keep_model() {
  local name=$1 arch=${2:-deepseek_v3}
  if [ ! -f "$KEEP/$name/config.json" ]; then say "generating $name ($arch)"; fi
  make_tiny_mla "$KEEP/$name" "$KEEP/$name.log" "$arch" "$name"
}

# tail_server_logs DIR [BYTES]: server logs under DIR cut to their last BYTES (200 kB), so an archive stays small.
tail_server_logs() {
  local keep=${2:-200000}
  find "$1" -name server.log -size +"$(( keep / 1000 ))"k | while read -r log; do
    tail -c "$keep" "$log" > "$log.tail" && mv "$log.tail" "$log"
  done
}

# pack_run RUN NAME [LOG]: reports/RUN (with the qualify log LOG beside it, server logs cut) as $OUT/NAME.tar.gz.
pack_run() {
  local run=$1 name=$2 log=${3:-}
  tail_server_logs "reports/$run" 150000
  if [ -n "$log" ]; then cp "$log" "reports/$run/" 2>/dev/null; fi
  tar czf "$OUT/$name.tar.gz" -C reports "$run" 2>/dev/null
}

# save_references: $KEEP's reference store (and the e2e floor) as $OUT/references.tgz, for the next session's
# .device-refs/.
save_references() {
  tar czf "$OUT/references.tgz" -C "$KEEP" references $([ -d "$KEEP/e2e-floor" ] && echo e2e-floor) 2>/dev/null
}

# record_versions: the GPU, driver, torch, CUDA, vLLM and transformers of this machine, as $OUT/versions.txt.
record_versions() {
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, vllm, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda); print('vllm', vllm.__version__); print('transformers', transformers.__version__)"
  } > "$OUT/versions.txt" 2>&1
}
