#!/usr/bin/env python3
"""Write a gattn-cpu (Hugging Face layout) Qwen3 checkpoint as a BF16 GGUF with llama.cpp's gguf-py.

Why not convert_hf_to_gguf.py: at the pinned llama.cpp it imports torch at module level and
reads the vocabulary through transformers.AutoTokenizer (its requirements pin torch 2.11.0 from
the PyTorch CPU index, which this machine cannot reach; PyPI's torch pulls in the CUDA wheels).
For the plain Qwen3 architecture the conversion is a rename plus metadata, so this script does
what the converter's Qwen3Model does for --outtype bf16, with numpy only:
  - the same hyper-parameter keys (TextModel.set_gguf_parameters),
  - the same tensor names (gguf.get_tensor_name_map), no q/k permutation (Qwen uses NEOX rope),
  - 2-D weights stored as BF16 bit-for-bit, 1-D norm weights widened to F32 (as the converter),
  - the tied lm_head omitted (llama.cpp reuses token_embd),
  - a GPT-2 style BPE vocabulary with the Qwen2 pre-tokenizer ("qwen2": both the checkpoint's
    byte-level tokenizer and the real Qwen3 one use Qwen's split regex), tokens padded to
    vocab_size with [PADi] and added tokens typed CONTROL (special or <|...|>) or USER_DEFINED,
    as the converter does.
Q8_0 is made from this file by llama-quantize (convert.sh).

Usage: write_gguf.py MODEL_DIR OUT.gguf [--tokenizer DIR]
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

import gguf


class ConvertError(Exception):
    pass


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConvertError(f"{path}: not found")
    except json.JSONDecodeError as e:
        raise ConvertError(f"{path}: invalid JSON: {e}")


def safetensors_arrays(path: Path) -> dict[str, np.ndarray]:
    """Zero-copy views of every tensor (numpy has no bfloat16: BF16 is viewed as uint16)."""
    dtypes = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}
    with path.open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in dtypes:
            raise ConvertError(f"{path}: tensor {name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        arrays[name] = data[begin:end].view(dtypes[info["dtype"]]).reshape(info["shape"])
    return arrays


def to_f32(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint16:  # bf16 bits are the top half of an f32
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.uint16:
        return a
    # round-to-nearest-even, as gguf.quants does for BF16
    bits = a.astype(np.float32).view(np.uint32)
    return ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)


def check_config(cfg: dict, path: Path) -> None:
    arch = (cfg.get("architectures") or [None])[0]
    if arch != "Qwen3ForCausalLM":
        raise ConvertError(f"{path}: architectures[0] = {arch!r}, expected 'Qwen3ForCausalLM'")
    for gate in ("headwise_attn_output_gate", "elementwise_attn_output_gate"):
        if cfg.get(gate):
            raise ConvertError(
                f"{path}: {gate} = true; llama.cpp has no gated Qwen3, only the baseline "
                "(--gate none) checkpoint can be converted")
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps", "rope_theta"):
        if key not in cfg:
            raise ConvertError(f"{path}: missing field {key!r}")


def add_vocab(writer: gguf.GGUFWriter, tok_dir: Path, vocab_size: int) -> None:
    tok = read_json(tok_dir / "tokenizer.json")
    model = tok.get("model", {})
    if model.get("type") != "BPE":
        raise ConvertError(f"{tok_dir / 'tokenizer.json'}: model.type = {model.get('type')!r}, expected 'BPE'")
    if not model.get("merges"):
        # llama.cpp refuses a BPE vocabulary without merges (and gguf-py skips empty arrays);
        # `gattn-cpu init` writes such a byte-level tokenizer.
        raise ConvertError(
            f"{tok_dir / 'tokenizer.json'}: BPE tokenizer has no merges, which llama.cpp cannot load; "
            "pass --tokenizer DIR with a full one (e.g. /work/shared/data/qwen3-tokenizer)")
    id_to_token: dict[int, str] = {i: t for t, i in model["vocab"].items()}
    added_types: dict[int, gguf.TokenType] = {}
    for added in tok.get("added_tokens", []):
        id_to_token[added["id"]] = added["content"]
        # as the converter's does_token_look_special: <|fim_prefix|> etc. are control tokens
        content = added["content"]
        special = added.get("special") or (content.startswith("<|") and content.endswith("|>"))
        added_types[added["id"]] = gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED
    if max(id_to_token) >= vocab_size:
        raise ConvertError(
            f"{tok_dir / 'tokenizer.json'}: token id {max(id_to_token)} does not fit vocab_size {vocab_size}")
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in id_to_token:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(id_to_token[i])
            types.append(added_types.get(i, gguf.TokenType.NORMAL))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(tok_dir, load_merges=True, n_vocab=vocab_size).add_to_gguf(writer)


def convert(model_dir: Path, out: Path, tok_dir: Path) -> None:
    cfg = read_json(model_dir / "config.json")
    check_config(cfg, model_dir / "config.json")
    n_layers = cfg["num_hidden_layers"]

    writer = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN3])
    writer.add_name(model_dir.name)
    writer.add_block_count(n_layers)
    writer.add_context_length(cfg.get("max_position_embeddings", 40960))
    writer.add_embedding_length(cfg["hidden_size"])
    writer.add_feed_forward_length(cfg["intermediate_size"])
    writer.add_head_count(cfg["num_attention_heads"])
    writer.add_head_count_kv(cfg["num_key_value_heads"])
    writer.add_rope_freq_base(cfg["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    writer.add_key_length(cfg["head_dim"])
    writer.add_value_length(cfg["head_dim"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    add_vocab(writer, tok_dir, cfg["vocab_size"])

    weights = model_dir / "model.safetensors"
    if not weights.exists():
        raise ConvertError(f"{weights}: not found (sharded checkpoints are not supported)")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN3, n_layers)
    tied = cfg.get("tie_word_embeddings", False)
    for name, array in safetensors_arrays(weights).items():
        if tied and name == "lm_head.weight":
            continue
        new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ConvertError(f"{weights}: tensor {name!r} has no llama.cpp Qwen3 name")
        if array.ndim == 1:
            writer.add_tensor(new_name, to_f32(array))
        else:
            writer.add_tensor(new_name, to_bf16_bits(array), raw_dtype=gguf.GGMLQuantizationType.BF16)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file(progress=False)
    writer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=Path, help="checkpoint dir (config.json, model.safetensors)")
    parser.add_argument("out", type=Path, help="output .gguf path")
    parser.add_argument("--tokenizer", type=Path, default=None,
                        help="dir with tokenizer.json (+ tokenizer_config.json) to use instead of the checkpoint's")
    args = parser.parse_args()
    try:
        convert(args.model_dir, args.out, args.tokenizer or args.model_dir)
    except ConvertError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
