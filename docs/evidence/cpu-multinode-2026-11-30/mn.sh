set -x
PY=/work/main/.venv-server/bin/python
export VLLM_TARGET_DEVICE=cpu VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1
COMMON="serve /work/main/models/tiny-llama --served-model-name tiny-llama --max-model-len 2048 --tensor-parallel-size 2 --dtype float32 --enforce-eager --nnodes 2 --master-addr 127.0.0.1 --master-port 29533"
setsid $PY vllm_cli.py $COMMON --node-rank 1 --headless > r1.log 2>&1 &
P1=$!
setsid $PY vllm_cli.py $COMMON --node-rank 0 --host 127.0.0.1 --port 18555 > r0.log 2>&1 &
P0=$!
for i in $(seq 150); do
  curl -s -m 2 127.0.0.1:18555/health >/dev/null && { echo HEALTHY after $i; break; }
  kill -0 $P0 2>/dev/null || { echo r0 died; break; }
  sleep 1
done
curl -s -m 30 127.0.0.1:18555/v1/completions -H 'content-type: application/json' -d '{"model":"tiny-llama","prompt":"The answer is","max_tokens":8,"temperature":0}'
echo
kill -TERM -$P0 -$P1 2>/dev/null; sleep 5; kill -9 -$P0 -$P1 2>/dev/null
