# Sourced by the device scripts (ON the GPU device machine, from the repository root, after ../shared/gpu's
# device_install.sh put vLLM 0.25.0 in /tmp/site): the environment every process there needs, the harness's missing
# dependencies, and the tiny MLA model made once per machine.

# NVLink multicast stays off on these machines (it can take shared GPUs down); flashinfer is not carried.
device_env() {
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_USE_FLASHINFER_SAMPLER=0
  export PYTHONPATH=/tmp/site:/tmp/hsite:$PWD
  export HARNESS_SERVER_PYTHON=python3 HARNESS_GSM8K_DIR=$PWD/.gpu-payload/gsm8k
  if [ ! -f /tmp/hsite/.installed ]; then
    python3 -m pip install -q --no-index --no-deps --target /tmp/hsite .gpu-payload/harness/*.whl \
      && touch /tmp/hsite/.installed
  fi
}

# make_tiny_mla DIR LOG: the generated tiny MLA model in DIR (kept there while the machine is warm), linked as
# models/tiny-mla. The generator refuses a model whose retrieval circuit falls short (copy accuracy < 0.9 at a grid
# length): measured 1.0 at 1k-122k on one H200 (docs/evidence/h200-long-context-2026-12-02c.md).
make_tiny_mla() {
  local dir=$1 log=$2
  if [ ! -f "$dir/config.json" ]; then
    python3 -m harness.tinymodel --arch deepseek_v3 --device cuda --out "$dir" \
      --gsm8k-train "$HARNESS_GSM8K_DIR/train.jsonl" > "$log" 2>&1 || { tail -30 "$log"; return 3; }
  fi
  mkdir -p models
  [ "$(readlink -f models/tiny-mla)" = "$(readlink -f "$dir")" ] || { rm -rf models/tiny-mla; ln -s "$dir" models/tiny-mla; }
}

# tail_server_logs DIR: server logs under DIR cut to their last 200 kB, so an archive of runs stays small.
tail_server_logs() {
  find "$1" -name server.log -size +200k | while read -r log; do
    tail -c 200000 "$log" > "$log.tail" && mv "$log.tail" "$log"
  done
}
