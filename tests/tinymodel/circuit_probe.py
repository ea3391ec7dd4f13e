"""Run in the server environment by test_circuit.py: a seeded random-init Llama of the CPU tiny model's shape, with
the retrieval circuit installed (optionally with a planted fault); prints retrieval accuracy and ordinary-text drift
as JSON. The circuit must not depend on what the trained weights are, so random weights test it as well."""

import json
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from harness.tinymodel.circuit import Faults, install_llama_circuit, one_kv_head_per_query_head, widen_llama
from harness.tinymodel.probe import ordinary_drift, random_prompts, retrieval_accuracy

torch.manual_seed(0)
torch.set_num_threads(1)
fault = Faults(**json.loads(sys.argv[1]))
length = int(sys.argv[2])
cfg = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, max_position_embeddings=8192, vocab_size=512,
                  rope_theta=10000.0, tie_word_embeddings=False)
base = LlamaForCausalLM(cfg).eval()
with torch.no_grad():
    base.lm_head.weight.mul_(40)  # logits of the trained model's size (top ~20-30), not near-uniform
ordinary, needles = list(range(4, 512)), list(range(512, 768))
wide = widen_llama(base, 768).eval()
info = install_llama_circuit(wide, 512, needles, fault, random_prompts(ordinary, 2, 128, seed=1))
served = one_kv_head_per_query_head(wide)  # as generate.py saves it: one KV head per query head (TP2 splits them)
ids = torch.tensor([random_prompts(ordinary, 1, 96, seed=2)[0]])
with torch.no_grad():
    unroll_delta = float((served(ids).logits - wide(ids).logits).abs().max())
print(json.dumps({"retrieval": retrieval_accuracy(served, ordinary, needles, (length,)),
                  "drift": ordinary_drift(base, served, random_prompts(ordinary, 4, 48)),
                  "kv_heads": [wide.config.num_key_value_heads, served.config.num_key_value_heads],
                  "unroll_delta": unroll_delta, "circuit": info}))
