"""The paper's output gate (arXiv 2505.06708) on transformers' stock Qwen3, for the PyTorch peer.

A gated checkpoint written by gattn-cpu sets `headwise_attn_output_gate` or
`elementwise_attn_output_gate` in config.json, and its q_proj has extra output rows: per KV
group (g = num_attention_heads / num_key_value_heads query heads), `g * head_dim` query rows
followed by `g * s` gate-score rows, s = 1 (headwise) or head_dim (elementwise). Query head h is
head h % g of group h / g. Each head's attention output is multiplied by sigmoid(gate scores)
before o_proj; the gate is not normed and not rotated.

`load_model` builds transformers' Qwen3ForCausalLM, swaps in GatedQwen3Attention when the
config has a gate, and loads the safetensors weights as stored (no random init first).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3 import modeling_qwen3
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding, apply_rotary_pos_emb

GATE_KEYS = {"headwise_attn_output_gate": "headwise", "elementwise_attn_output_gate": "elementwise"}


def gate_mode(config: dict) -> str:
    """'none', 'headwise' or 'elementwise' from a config.json object (both set is an error)."""
    modes = [mode for key, mode in GATE_KEYS.items() if config.get(key)]
    if len(modes) > 1:
        raise ValueError("config.json: headwise_attn_output_gate and elementwise_attn_output_gate are both true")
    return modes[0] if modes else "none"


class GatedQwen3Attention(Qwen3Attention):
    """Qwen3Attention whose q_proj also yields the gate scores, applied before o_proj."""

    def __init__(self, config: Qwen3Config, layer_idx: int, mode: str):
        super().__init__(config, layer_idx)
        self.group = config.num_attention_heads // config.num_key_value_heads
        self.scores_per_head = 1 if mode == "headwise" else self.head_dim
        rows = config.num_attention_heads * (self.head_dim + self.scores_per_head)
        self.q_proj = torch.nn.Linear(config.hidden_size, rows, bias=config.attention_bias)

    def forward(self, hidden_states, position_embeddings, attention_mask, cache=None, past_key_values=None, **kwargs):
        cache = cache if cache is not None else past_key_values
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        g, d, s = self.group, self.head_dim, self.scores_per_head

        groups = self.q_proj(hidden_states).view(*input_shape, -1, g * (d + s))
        queries = groups[..., : g * d].reshape(hidden_shape)
        gate = groups[..., g * d :].reshape(*input_shape, self.config.num_attention_heads, s)

        query_states = self.q_norm(queries).transpose(1, 2)
        key_states = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if cache is not None:
            key_states, value_states = cache.update(key_states, value_states, self.layer_idx, kwargs=kwargs)

        attention = modeling_qwen3.ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, modeling_qwen3.eager_attention_forward
        )
        attn_output, attn_weights = attention(
            self, query_states, key_states, value_states, attention_mask,
            dropout=0.0, scaling=self.scaling, sliding_window=self.sliding_window, **kwargs,
        )
        # attn_output is [batch, tokens, heads, head_dim]; the gate broadcasts over head_dim when s = 1.
        attn_output = attn_output * torch.sigmoid(gate)
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), attn_weights


def weight_files(model_dir: Path) -> list[Path]:
    """model.safetensors, or the shards model.safetensors.index.json names."""
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [model_dir / name for name in names]
    raise FileNotFoundError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


def load_model(model_dir: Path, dtype: torch.dtype, attn_implementation: str = "sdpa") -> tuple[Qwen3ForCausalLM, str]:
    """The checkpoint as a Qwen3ForCausalLM in `dtype` (gated attention if its config says so)."""
    raw = json.loads((model_dir / "config.json").read_text())
    if raw.get("gattn_quantization"):
        raise ValueError(f"{model_dir}/config.json: gattn_quantization is set: PyTorch reads only the "
                         "unquantized checkpoint (the directory `gattn-cpu quantize` read)")
    if raw.get("use_qk_norm") is False:
        raise ValueError(f"{model_dir}/config.json: use_qk_norm is false; transformers' Qwen3 always "
                         "norms queries and keys, so it would not compute this model")
    mode = gate_mode(raw)
    config = Qwen3Config.from_dict(raw)
    config._attn_implementation = attn_implementation
    config.use_cache = True

    # Parameters on the meta device: no memory and no random init; the weights are assigned below.
    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
        if mode != "none":
            for i, layer in enumerate(model.model.layers):
                layer.self_attn = GatedQwen3Attention(config, i, mode)
    state = {}
    for path in weight_files(model_dir):
        state.update(load_file(str(path)))
    state = {name: tensor.to(dtype) for name, tensor in state.items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    missing = [m for m in missing if not (config.tie_word_embeddings and m == "lm_head.weight")]
    if missing or unexpected:
        raise ValueError(f"{model_dir}: weights do not match a {mode} Qwen3: missing {missing[:5]}, "
                         f"unexpected {unexpected[:5]}")
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    # The RoPE tables are buffers computed at construction, not stored: build them for real.
    model.model.rotary_emb = Qwen3RotaryEmbedding(config)
    model.eval()
    return model, mode
