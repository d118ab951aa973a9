#!/usr/bin/env python3
"""Time prefill and greedy decode of a gattn-cpu checkpoint in PyTorch (transformers' Qwen3).

Usage: bench.py -m MODEL_DIR [-p N] [-n M] [-d D] [-r R] [-t THREADS] [--dtype bf16|f32]
                [--attn sdpa|eager] [--seed S] [--no-warmup]
       bench.py -m MODEL_DIR --check-logits OUT.npy --prompt-ids 1,2,3 [--dtype f32]

As `gattn-cpu bench` does: D tokens cached by an untimed prefill, an untimed warm-up prefill of
N random ids (seeded), R timed prefills of N tokens on top of the D cached ones (the median
reported), then M greedy decode steps on top of the D cached tokens, each timed (the median of
the per-token rates reported). Prints one JSON line on stdout and a readable summary on stderr.
--check-logits writes the logits of every prompt position as an f32 .npy [tokens, vocab], the
same file `gattn-cpu logits --out` writes, and exits.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gated_qwen3 import load_model  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", type=Path, required=True, help="checkpoint directory (HF layout)")
    p.add_argument("-p", "--prompt", type=int, default=512, help="prompt tokens of the timed prefill")
    p.add_argument("-n", "--gen", type=int, default=32, help="tokens decoded greedily, each timed")
    p.add_argument("-d", "--depth", type=int, default=0, help="tokens cached before prefill and decode")
    p.add_argument("-r", "--repetitions", type=int, default=3, help="timed prefills (median reported)")
    p.add_argument("-t", "--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    p.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa", help="attn_implementation")
    p.add_argument("-s", "--seed", type=int, default=0, help="seed of the random token ids")
    p.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up prefill")
    p.add_argument("--check-logits", type=Path, metavar="OUT.npy", help="write prompt logits and exit")
    p.add_argument("--prompt-ids", help="comma-separated token ids for --check-logits")
    args = p.parse_args()
    for name in ("prompt", "repetitions", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1")
    for name in ("gen", "depth"):
        if getattr(args, name) < 0:
            p.error(f"--{name} must be >= 0")
    if args.check_logits and not args.prompt_ids:
        p.error("--check-logits needs --prompt-ids")
    return args


def parse_ids(text: str, vocab_size: int) -> list[int]:
    try:
        ids = [int(x) for x in text.split(",")]
    except ValueError:
        raise SystemExit(f"error: --prompt-ids: '{text}' is not a comma-separated list of integers")
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise SystemExit(f"error: --prompt-ids: {bad[0]} is outside the vocabulary (0..{vocab_size - 1})")
    return ids


def write_npy_atomically(path: Path, array: np.ndarray) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check_logits(model, args) -> int:
    """Write the full-prompt logits; also run the prompt through the KV cache (half prefilled, then
    token by token, as the benchmark's decode does) and fail if that path disagrees."""
    ids = parse_ids(args.prompt_ids, model.config.vocab_size)
    with torch.inference_mode():
        logits = model(torch.tensor([ids]), use_cache=False).logits[0].float()
        cache = DynamicCache(config=model.config)
        half = max(1, len(ids) // 2)
        steps = [model(input_ids=torch.tensor([ids[:half]]), cache=cache, use_cache=True).logits[0]]
        steps += [forward(model, torch.tensor([[i]]), cache)[None] for i in ids[half:]]
        cached = torch.cat(steps).float()
    write_npy_atomically(args.check_logits, logits.numpy())
    ratio = float((logits - cached).abs().max() / logits.std())
    print(f"logits [{len(ids)}, {logits.shape[-1]}] -> {args.check_logits}; through the KV cache: "
          f"max |diff| / std {ratio:.2e}", file=sys.stderr)
    tolerance = 1e-4 if args.dtype == "f32" else 5e-2
    if ratio > tolerance:
        print(f"error: the KV-cache path differs from the full forward by {ratio:.2e} > {tolerance:g}",
              file=sys.stderr)
        return 1
    return 0


def forward(model, ids: torch.Tensor, cache: DynamicCache) -> torch.Tensor:
    """One forward pass over `ids` on top of `cache`; the last position's logits."""
    return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1).logits[0, -1]


def truncate(cache: DynamicCache, length: int) -> None:
    """Drop the cached tokens past `length` (transformers' crop takes minus the count to drop)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)
    if cache.get_seq_length() != length:
        raise RuntimeError(f"the KV cache holds {cache.get_seq_length()} tokens after truncating to {length}")


def rates(tokens: int, seconds: list[float]) -> dict:
    per_second = sorted(tokens / s for s in seconds)
    return {"median": statistics.median(per_second), "min": per_second[0], "max": per_second[-1]}


def bench(model, args) -> dict:
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    depth_ids = torch.randint(0, vocab, (1, args.depth), generator=gen)
    prompt_ids = torch.randint(0, vocab, (1, args.prompt), generator=gen)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        if args.depth:
            forward(model, depth_ids, cache)
        if not args.no_warmup:
            forward(model, prompt_ids, cache)
            truncate(cache, args.depth)
        prefill_seconds = []
        for _ in range(args.repetitions):
            start = time.perf_counter()
            forward(model, prompt_ids, cache)
            prefill_seconds.append(time.perf_counter() - start)
            truncate(cache, args.depth)
        # Decode on top of the D cached tokens, as gattn-cpu bench does: each step one token.
        token = prompt_ids[:, -1:]
        decode_seconds = []
        for _ in range(args.gen):
            start = time.perf_counter()
            token = forward(model, token, cache).argmax().view(1, 1)
            decode_seconds.append(time.perf_counter() - start)
    result = {
        "engine": "torch",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model_dir": str(args.model),
        "settings": {"prompt_tokens": args.prompt, "gen_tokens": args.gen, "depth": args.depth,
                     "repetitions": args.repetitions, "warmup": not args.no_warmup, "seed": args.seed},
        "model": {"gate": args.gate, "layers": model.config.num_hidden_layers,
                  "hidden_size": model.config.hidden_size, "dtype": args.dtype, "attn": args.attn},
        "machine": {"threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability()},
        "prefill": {"tokens": args.prompt, "depth": args.depth,
                    "tokens_per_second": rates(args.prompt, prefill_seconds), "seconds": prefill_seconds},
    }
    if decode_seconds:
        result["decode"] = {"depth": args.depth, "tokens": args.gen,
                            "tokens_per_second": rates(1, decode_seconds), "seconds": decode_seconds}
    return result


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)
    try:
        model, args.gate = load_model(args.model, DTYPES[args.dtype], args.attn)
    except (OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.check_logits:
        return check_logits(model, args)
    result = bench(model, args)
    print(json.dumps(result), flush=True)
    pre = result["prefill"]["tokens_per_second"]
    line = (f"torch {result['torch']} {args.dtype} {args.attn}, gate {args.gate}, {args.threads} threads: "
            f"prefill {args.prompt} after {args.depth}: {pre['median']:.2f} tok/s median "
            f"(min {pre['min']:.2f}, max {pre['max']:.2f}, {args.repetitions} reps)")
    if "decode" in result:
        dec = result["decode"]["tokens_per_second"]
        line += f"; decode {args.gen} after {args.depth}: {dec['median']:.3f} tok/s median"
    print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
