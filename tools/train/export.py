"""Export a trained checkpoint (train.py) in Hugging Face Qwen3 layout for gattn-cpu.

Writes config.json, model.safetensors (HF tensor names, tied lm_head omitted, metadata
{"format": "pt"}) and the engine's byte-level tokenizer files next to them.
"""

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from model import Config, GatedQwen3

DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f32": (torch.float32, "float32")}


def hf_config(cfg: Config, dtype_name: str) -> dict:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": [256, 258],
        "elementwise_attn_output_gate": cfg.gate == "elementwise",
        "head_dim": cfg.head_dim,
        "headwise_attn_output_gate": cfg.gate == "headwise",
        "hidden_act": "silu",
        "hidden_size": cfg.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": cfg.intermediate_size,
        "max_position_embeddings": cfg.max_position_embeddings,
        "max_window_layers": cfg.num_hidden_layers,
        "model_type": "qwen3",
        "num_attention_heads": cfg.num_attention_heads,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_key_value_heads": cfg.num_key_value_heads,
        "pad_token_id": 256,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": cfg.rope_theta,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": dtype_name,
        "use_cache": True,
        "use_qk_norm": True,
        "use_sliding_window": False,
        "vocab_size": cfg.vocab_size,
    }


def load_checkpoint(path) -> GatedQwen3:
    ck = torch.load(path, map_location="cpu")
    model = GatedQwen3(Config(**ck["config"]))
    model.load_state_dict(ck["state_dict"])
    return model.eval()


def export(model: GatedQwen3, out: Path, dtype: str, tokenizer_dir: Path):
    out.mkdir(parents=True, exist_ok=True)
    torch_dtype, name = DTYPES[dtype]
    tensors = {k: v.detach().to(torch_dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(hf_config(model.cfg, name), indent=2) + "\n")
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / f, out / f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=DTYPES, default="bf16")
    ap.add_argument("--tokenizer-dir", required=True, help="a `gattn-cpu init` output directory")
    args = ap.parse_args()
    model = load_checkpoint(args.checkpoint)
    export(model, Path(args.out), args.dtype, Path(args.tokenizer_dir))
    print(f"wrote {args.out} ({model.num_parameters()} parameters, {args.dtype})")


if __name__ == "__main__":
    main()
