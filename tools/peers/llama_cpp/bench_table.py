#!/usr/bin/env python3
"""Merge llama-bench JSON outputs into one results file and print a compact table.

Usage: bench_table.py [--load FILE] [--out RESULTS.json] RUN.json...
Throughput per row: median of llama-bench's per-repetition tokens/s (samples_ts), with its mean
and standard deviation as llama-bench reports them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def test_name(r: dict) -> str:
    name = f"pp{r['n_prompt']}" if r["n_prompt"] > 0 else f"tg{r['n_gen']}"
    if r["n_prompt"] > 0 and r["n_gen"] > 0:
        name += f"+tg{r['n_gen']}"
    if r.get("n_depth", 0) > 0:
        name += f" @ d{r['n_depth']}"
    return name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--load", type=Path, help="text file of load averages to keep with the results")
    parser.add_argument("--out", type=Path, help="merged results file to write")
    args = parser.parse_args()

    records = []
    for path in args.runs:
        try:
            records += json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            print(f"error: {path}: {e}", file=sys.stderr)
            return 1
    if not records:
        print("error: no llama-bench records", file=sys.stderr)
        return 1
    load = args.load.read_text().splitlines() if args.load else []
    if args.out:
        args.out.write_text(json.dumps({"load_average": load, "records": records}, indent=1) + "\n")

    first = records[0]
    print(f"llama.cpp {first.get('build_commit')} (build {first.get('build_number')}), "
          f"{first.get('cpu_info')}, backend {first.get('backends')}")
    print(f"{'model':<28} {'size GiB':>8} {'test':<14} {'fa':>2} {'thr':>3} {'median t/s':>10} {'mean t/s':>9} {'sd':>6}")
    for r in records:
        median = statistics.median(r["samples_ts"]) if r.get("samples_ts") else float("nan")
        print(f"{Path(r['model_filename']).name:<28} {r['model_size'] / 2**30:>8.2f} {test_name(r):<14} "
              f"{int(r['flash_attn']):>2} {r['n_threads']:>3} {median:>10.2f} {r['avg_ts']:>9.2f} {r['stddev_ts']:>6.2f}")
    for line in load:
        print(line)
    if args.out:
        print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
