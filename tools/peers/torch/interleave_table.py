#!/usr/bin/env python3
"""Print the runs interleave.sh wrote: PyTorch against gattn-cpu per round, and median ratios.

Usage: interleave_table.py OUT_DIR
Files: torch-p{N}-{round}.json (bench.py) and gattn-{kv}-p{N}-{round}.json (gattn-cpu bench
--json). A ratio is gattn-cpu / PyTorch within one round; the medians are over rounds.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def rates(path: Path) -> tuple[float, float]:
    """(prefill tok/s, decode tok/s), each the run's own median."""
    report = json.loads(path.read_text())
    decode = report.get("decode", {}).get("tokens_per_second", {}).get("median", float("nan"))
    return report["prefill"]["tokens_per_second"]["median"], decode


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    runs: dict[tuple[int, int], dict[str, tuple[float, float]]] = defaultdict(dict)
    for path in sorted(out.glob("*.json")):
        m = re.fullmatch(r"(torch|gattn-\w+)-p(\d+)-(\d+)\.json", path.name)
        if m:
            runs[(int(m[2]), int(m[3]))][m[1]] = rates(path)
    if not runs:
        print(f"error: no run files in {out}", file=sys.stderr)
        return 1
    engines = sorted({e for r in runs.values() for e in r if e != "torch"})
    ratios: dict[tuple[int, str, int], list[float]] = defaultdict(list)
    print("prompt round engine        prefill tok/s  decode tok/s  prefill / torch")
    for (n, i), row in sorted(runs.items()):
        torch_prefill = row.get("torch", (float("nan"),))[0]
        for engine in ["torch", *engines]:
            if engine not in row:
                continue
            prefill, decode = row[engine]
            ratio = prefill / torch_prefill
            if engine != "torch":
                ratios[(n, engine, 0)].append(ratio)
                ratios[(n, engine, 1)].append(decode / row.get("torch", (0, float("nan")))[1])
            print(f"{n:>6} {i:>5} {engine:<13} {prefill:>13.2f} {decode:>13.3f} {ratio:>16.2f}")
    print("median over rounds of gattn-cpu / PyTorch:")
    for n in sorted({n for n, _ in runs}):
        for engine in engines:
            pre, dec = ratios.get((n, engine, 0)), ratios.get((n, engine, 1))
            if pre:
                print(f"  prompt {n:>6} {engine:<13} prefill {statistics.median(pre):.2f}x, "
                      f"decode {statistics.median(dec):.2f}x ({len(pre)} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
