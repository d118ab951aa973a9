"""Compare gattn-cpu's logits with this PyTorch model's on an exported checkpoint.

Loads the exported model.safetensors (so bf16 rounding is shared by both sides), runs
`gattn-cpu logits`, and prints the max abs difference.
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from model import Config, GatedQwen3


def load_exported(model_dir: Path) -> GatedQwen3:
    hf = json.loads((model_dir / "config.json").read_text())
    gate = "elementwise" if hf["elementwise_attn_output_gate"] else "headwise" if hf["headwise_attn_output_gate"] else "baseline"
    cfg = Config(
        vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"], intermediate_size=hf["intermediate_size"],
        num_hidden_layers=hf["num_hidden_layers"], num_attention_heads=hf["num_attention_heads"],
        num_key_value_heads=hf["num_key_value_heads"], head_dim=hf["head_dim"], rope_theta=hf["rope_theta"],
        rms_norm_eps=hf["rms_norm_eps"], max_position_embeddings=hf["max_position_embeddings"], gate=gate,
    )
    model = GatedQwen3(cfg)
    state = {k: v.float() for k, v in load_file(str(model_dir / "model.safetensors")).items()}
    model.load_state_dict(state)
    return model.eval()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--engine", required=True, help="path to the gattn-cpu binary")
    ap.add_argument("--text", default="One of the special magic numbers for brawny-outrun is: 6768441.\nThe grass is green.")
    ap.add_argument("--tokens", type=int, default=0, help="if >0, use this many tokens of repeated text")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model_dir = Path(args.model)
    ids = list(args.text.encode())
    if args.tokens:
        ids = (ids * (args.tokens // len(ids) + 1))[: args.tokens]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "logits.npy"
        # The reference path (f32 kernels, f32 KV cache): the bf16 paths round activations and keys.
        subprocess.run([args.engine, "logits", "-m", str(model_dir), "-t", "1", "--weights", "f32", "--kv", "f32",
                        "--prompt-ids",
                        ",".join(map(str, ids)), "--out", str(out)], check=True, capture_output=True)
        rust = np.load(out)
    model = load_exported(model_dir)
    with torch.no_grad():
        ref = model(torch.tensor([ids]))[0].numpy()
    diff = np.abs(rust - ref)
    print(f"{model_dir}: {len(ids)} tokens, max abs diff {diff.max():.3e}, mean {diff.mean():.3e}, "
          f"logit scale {np.abs(ref).max():.2f}, argmax agree {(rust.argmax(-1) == ref.argmax(-1)).mean():.4f}")


if __name__ == "__main__":
    main()
