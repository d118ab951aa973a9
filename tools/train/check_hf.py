"""Cross-check: the baseline (no gate) export must give the same logits in Hugging Face
transformers' own Qwen3ForCausalLM as in model.py (both on the exported weights)."""

import sys
from pathlib import Path

import torch
from transformers import Qwen3ForCausalLM

from verify import load_exported

torch.set_num_threads(1)
path = Path(sys.argv[1])
ours = load_exported(path)
hf = Qwen3ForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
ids = torch.tensor([list(("One of the special magic numbers for brawny-outrun is: 6768441. " * 8).encode())])
with torch.no_grad():
    diff = (hf(ids).logits - ours(ids)).abs().max().item()
print(f"{path}: HF Qwen3ForCausalLM vs model.py, {ids.shape[1]} tokens, max abs diff {diff:.3e}")
