"""A small Qwen3 decoder with the output gate of "Gated Attention for Large Language Models"
(arXiv 2505.06708), written to match the Rust engine (crates/model) exactly.

q_proj's output per token is num_kv_heads groups; each group holds g*head_dim query values
followed by the group's gate scores (g per group when headwise, g*head_dim when elementwise),
where g = num_heads / num_kv_heads. Query head h is head h % g of group h // g, and it
attends with kv head h // g. The gate multiplies each head's attention output by
sigmoid(score) before o_proj; q_norm/k_norm apply to queries and keys only.
"""

import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

GATES = ("baseline", "headwise", "elementwise")


@dataclass
class Config:
    vocab_size: int = 320
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 48
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    max_position_embeddings: int = 1024
    gate: str = "baseline"

    @property
    def group(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def gate_scores_per_head(self) -> int:
        return {"baseline": 0, "headwise": 1, "elementwise": self.head_dim}[self.gate]

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rope_tables(head_dim: int, theta: float, positions: torch.Tensor):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        g, hd = cfg.group, cfg.head_dim
        self.q_rows_per_group = g * hd + g * cfg.gate_scores_per_head()
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * self.q_rows_per_group, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.num_attention_heads * hd, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)

    def split_q(self, x):
        """[B, T, hidden] -> queries [B, H, T, hd] and gate scores [B, H, T, s] (s = 0/1/hd)."""
        cfg = self.cfg
        b, t, _ = x.shape
        g, hd, s = cfg.group, cfg.head_dim, cfg.gate_scores_per_head()
        qg = self.q_proj(x).view(b, t, cfg.num_key_value_heads, self.q_rows_per_group)
        q = qg[..., : g * hd].reshape(b, t, cfg.num_attention_heads, hd).transpose(1, 2)
        gate = qg[..., g * hd :].reshape(b, t, cfg.num_attention_heads, s).transpose(1, 2)
        return q, gate

    def forward(self, x, cos, sin, return_probs=False):
        cfg = self.cfg
        b, t, _ = x.shape
        hd = cfg.head_dim
        q, gate = self.split_q(x)
        k = self.k_proj(x).view(b, t, cfg.num_key_value_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, cfg.num_key_value_heads, hd).transpose(1, 2)
        q, k = self.q_norm(q), self.k_norm(k)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        # GQA: head h uses kv head h // g.
        k = k.repeat_interleave(cfg.group, dim=1)
        v = v.repeat_interleave(cfg.group, dim=1)
        probs = None
        if return_probs:
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            mask = torch.ones(t, t, dtype=torch.bool).tril()
            probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
            out = probs @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / math.sqrt(hd))
        if cfg.gate != "baseline":
            out = out * torch.sigmoid(gate)  # [B,H,T,1] broadcasts for headwise
        out = out.transpose(1, 2).reshape(b, t, cfg.num_attention_heads * hd)
        return self.o_proj(out), probs


class MLP(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, return_probs=False):
        a, probs = self.self_attn(self.input_layernorm(x), cos, sin, return_probs)
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, probs


class Qwen3Inner(nn.Module):
    """Named like HF's Qwen3Model so state_dict keys are "model.layers.N...."."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class GatedQwen3(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        self.model = Qwen3Inner(cfg)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, return_probs=False):
        """ids [B, T] -> logits [B, T, vocab] (and per-layer attention probs if asked)."""
        t = ids.shape[1]
        cos, sin = rope_tables(self.cfg.head_dim, self.cfg.rope_theta, torch.arange(t))
        x = self.model.embed_tokens(ids)
        all_probs = []
        for layer in self.model.layers:
            x, probs = layer(x, cos, sin, return_probs)
            all_probs.append(probs)
        x = self.model.norm(x)
        logits = x @ self.model.embed_tokens.weight.T  # tied lm_head
        return (logits, all_probs) if return_probs else logits

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())
