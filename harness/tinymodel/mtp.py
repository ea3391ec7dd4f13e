"""A trained multi-token-prediction (MTP) layer for the tiny DeepseekV3, in DeepSeek's checkpoint format, so vLLM's
`mtp` speculative method (DeepSeekMTP, vllm/model_executor/models/deepseek_mtp.py) drafts with it.

vLLM's MTP step at position p takes the target's final (normed) hidden state h[p] and the embedding of the next token
x[p+1] (zeroed at position 0), computes eh_proj([enorm(emb); hnorm(h)]), one decoder block, and the shared head
(norm + lm head) predicts x[p+2]. This module trains exactly that on GSM8K text with the target frozen, and writes the
tensors under `model.layers.<num_hidden_layers>.` (enorm, hnorm, eh_proj, shared_head.{norm,head}, embed_tokens and the
block's self_attn / mlp / layernorms), with `num_nextn_predict_layers: 1` in config.json. The block is dense: the
config's first_k_dense_replace covers the MTP layer's index too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MTP_STEPS = 400
MTP_LR = 3e-3


def build_mtp(config):
    import torch
    from torch import nn
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm

    h = config.hidden_size

    class SharedHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = DeepseekV3RMSNorm(h, eps=config.rms_norm_eps)
            self.head = nn.Linear(h, config.vocab_size, bias=False)

    class MtpLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enorm = DeepseekV3RMSNorm(h, eps=config.rms_norm_eps)
            self.hnorm = DeepseekV3RMSNorm(h, eps=config.rms_norm_eps)
            self.eh_proj = nn.Linear(2 * h, h, bias=False)
            self.block = DeepseekV3DecoderLayer(config, layer_idx=config.num_hidden_layers)
            self.shared_head = SharedHead()

        def forward(self, emb, hidden, position_embeddings, mask):
            x = self.eh_proj(torch.cat([self.enorm(emb), self.hnorm(hidden)], dim=-1))
            out = self.block(x, attention_mask=mask, position_embeddings=position_embeddings)
            x = out[0] if isinstance(out, tuple) else out
            return self.shared_head.head(self.shared_head.norm(x))

    return MtpLayer()


def train_mtp(model, tokenizer, texts: list[str], device: str, steps: int = MTP_STEPS, seq_len: int = 256,
              batch: int = 16, seed: int = 1234) -> tuple[object, float, float]:
    """(the MTP layer, final loss, held-out top-1 accuracy of x[p+2]) with the target frozen."""
    import torch

    torch.manual_seed(seed)
    mtp = build_mtp(model.config)
    with torch.no_grad():
        mtp.shared_head.head.weight.copy_(model.lm_head.weight.float())  # DeepSeek shares the output head
        mtp.shared_head.norm.weight.copy_(model.model.norm.weight.float())
    base = model.to(device=device, dtype=torch.bfloat16).eval()
    mtp.to(device)
    data = torch.tensor(tokenizer("".join(texts), add_special_tokens=False)["input_ids"], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW([p for n, p in mtp.named_parameters() if not n.startswith("shared_head.head")], lr=MTP_LR)
    t = seq_len - 1
    mask = torch.full((t, t), float("-inf"), device=device).triu(1)[None, None]
    pos = torch.arange(t, device=device)[None]

    def batch_loss(x):
        with torch.no_grad():
            hidden = base.model(input_ids=x).last_hidden_state.float()[:, :-1]  # h[p], p = 0..T-2
            emb = base.model.embed_tokens(x[:, 1:]).float()  # x[p+1]
            emb[:, 0] = 0  # vLLM masks the MTP input at position 0
            rope = tuple(r.float() for r in base.model.rotary_emb(emb, pos.expand(x.shape[0], -1)))
        logits = mtp(emb, hidden, rope, mask)
        target = torch.cat([x[:, 2:], x[:, -1:]], dim=1)  # x[p+2]; the last position has none
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 target[:, :-1].reshape(-1)), logits, target

    loss = torch.tensor(float("nan"))
    mtp.train()
    for i in range(steps):
        starts = torch.randint(0, len(data) - seq_len - 1, (batch,), generator=gen)
        x = torch.stack([data[s:s + seq_len] for s in starts.tolist()]).to(device)
        loss, _, _ = batch_loss(x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 100 == 0:
            print(f"  mtp step {i:4d} loss {loss.item():.3f}", file=sys.stderr)
    mtp.eval()
    with torch.no_grad():
        x = torch.stack([data[s:s + seq_len] for s in range(0, 8 * seq_len, seq_len)]).to(device)
        _, logits, target = batch_loss(x)
        acc = (logits[:, :-1].argmax(-1) == target[:, :-1]).float().mean().item()
    return mtp.cpu(), float(loss.item()), acc


def save_mtp(out: Path, model, mtp) -> int:
    """Add the MTP tensors to out/model.safetensors under model.layers.<num_hidden_layers>. (DeepSeek's format)."""
    import torch
    from safetensors.torch import load_file, save_file

    layer = model.config.num_hidden_layers
    prefix = f"model.layers.{layer}."
    tensors = load_file(str(out / "model.safetensors"))
    for name, t in mtp.state_dict().items():
        key = prefix + (name.replace("block.", "", 1) if name.startswith("block.") else name)
        tensors[key] = t.detach().to(torch.bfloat16).contiguous().clone()
    tensors[prefix + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["num_nextn_predict_layers"] = 1
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    return sum(1 for k in tensors if k.startswith(prefix))
