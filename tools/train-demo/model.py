"""model.py: the Llama architecture as Hugging Face's LlamaForCausalLM computes it, small
enough to read top to bottom. Owns the module layout and the parameter names (they
are the HF checkpoint names, so export is a rename-free dump). It must never hold
training logic (train.py) or file formats (export.py).

Per layer:  h = x + o_proj(attn(rope(q_proj(norm1(x))), rope(k_proj(...)), v_proj(...)))
            y = h + down_proj(silu(gate_proj(norm2(h))) * up_proj(norm2(h)))
RoPE is HF's "rotate half" form (pairs are (i, i + head_dim/2), not interleaved);
query head h reads key/value head h // (heads / kv_heads) (HF's repeat_kv).
The output projection is tied to the token embedding: logits = norm(x) @ embed^T.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass(frozen=True)
class Config:
    vocab_size: int = 4096
    hidden_size: int = 256
    num_hidden_layers: int = 6
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    intermediate_size: int = 704
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_tables(cfg: Config, num_positions: int, device=None):
    """cos, sin: [num_positions, head_dim], each half repeated (HF's layout)."""
    d = cfg.head_dim
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    t = torch.arange(num_positions, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(device), emb.sin().to(device)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        d, h, kvh = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        self.q_proj = nn.Linear(cfg.hidden_size, h * d, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, kvh * d, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, kvh * d, bias=False)
        self.o_proj = nn.Linear(h * d, cfg.hidden_size, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        cfg = self.cfg
        d, h, kvh = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
        q = self.q_proj(x).view(b, t, h, d).transpose(1, 2)  # [b, h, t, d]
        k = self.k_proj(x).view(b, t, kvh, d).transpose(1, 2)  # [b, kvh, t, d]
        v = self.v_proj(x).view(b, t, kvh, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(h // kvh, dim=1)  # query head i reads kv head i // (h / kvh)
        v = v.repeat_interleave(h // kvh, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d) + mask  # [b, h, t, t]
        probs = F.softmax(scores.float(), dim=-1).to(q.dtype)
        out = (probs @ v).transpose(1, 2).reshape(b, t, h * d)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    """HF's LlamaModel: the parameters live under `model.` in the checkpoint."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Llama(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        cos, sin = rope_tables(cfg, cfg.max_position_embeddings)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def init_weights(self, generator: torch.Generator):
        """GPT-2 style: N(0, 0.02), residual outputs scaled by 1/sqrt(2 * layers)."""
        std = 0.02
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layernorm.weight") or name == "model.norm.weight":
                    p.fill_(1.0)
                elif name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    p.normal_(0.0, std / math.sqrt(2 * self.cfg.num_hidden_layers), generator=generator)
                else:
                    p.normal_(0.0, std, generator=generator)

    def forward(self, ids):
        """ids: [b, t] int64, positions 0..t-1 -> logits [b, t, vocab] (f32 if weights are f32)."""
        t = ids.shape[1]
        if t > self.cfg.max_position_embeddings:
            raise ValueError(f"{t} tokens > max_position_embeddings {self.cfg.max_position_embeddings}")
        x = self.model.embed_tokens(ids)
        cos, sin = self.cos[:t], self.sin[:t]
        mask = torch.full((t, t), float("-inf")).triu(1)
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        return self.model.norm(x) @ self.model.embed_tokens.weight.T

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
