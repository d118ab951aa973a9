#!/usr/bin/env python3
"""Compare two logits .npy files [tokens, vocab]: max |a - b| relative to the std of a.

Usage: compare_logits.py [--label TEXT] [--tolerance T] REFERENCE.npy OTHER.npy
Exits 1 when the shapes differ or the ratio exceeds the tolerance.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reference")
    p.add_argument("other")
    p.add_argument("--label", default="")
    p.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args()
    a, b = np.load(args.reference), np.load(args.other)
    if a.shape != b.shape:
        print(f"{args.label}: shapes differ: {a.shape} vs {b.shape}", file=sys.stderr)
        return 1
    diff = float(np.abs(a.astype(np.float64) - b).max())
    std = float(a.std())
    ratio = diff / std
    verdict = "ok" if ratio <= args.tolerance else f"FAIL (> {args.tolerance:g})"
    print(f"{args.label}: {a.shape[0]} tokens x {a.shape[1]}: max |diff| {diff:.3e}, "
          f"std {std:.4f}, ratio {ratio:.2e} {verdict}")
    return 0 if ratio <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
