"""Prints the run-by-run pairs that interleave.sh wrote: llama.cpp's best (flash attention off or
on) against gattn-cpu, with gattn-cpu's roofline ratios, and the median ratios.
Usage: python3 interleave_table.py OUT_DIR"""
import glob
import json
import os
import re
import statistics
import sys


def llama(path):
    """(prefill tok/s, decode tok/s): the best record of each kind in a llama-bench JSON list."""
    records = json.load(open(path))
    prefill = max([r["avg_ts"] for r in records if r["n_prompt"] > 0] or [0.0])
    decode = max([r["avg_ts"] for r in records if r["n_gen"] > 0] or [0.0])
    return prefill, decode


def ours(path):
    report = json.load(open(path))
    prefill = (report.get("prefill") or {}).get("tokens_per_second", {}).get("median", 0.0)
    return (prefill, report["decode"]["tokens_per_second"]["median"],
            report["roofline"]["ratio"], report["roofline"]["paired_ratio"],
            report["bandwidth"]["mean_gbps"])


def rounds(out, pattern):
    i = 1
    while os.path.exists(os.path.join(out, pattern.format(i))):
        yield i
        i += 1


def main(out):
    for ours_name, llama_name in [("int8", "q8"), ("bf16", "bf16")]:
        pairs = []
        for i in rounds(out, f"ours-{ours_name}-{{}}.json"):
            lp, lt = llama(os.path.join(out, f"llama-{llama_name}-{i}.json"))
            op, ot, roof, paired, bw = ours(os.path.join(out, f"ours-{ours_name}-{i}.json"))
            pairs.append((op / lp, ot / lt))
            print(f"{ours_name} {i}: llama.cpp prefill {lp:.1f} decode {lt:.2f} | gattn-cpu prefill "
                  f"{op:.1f} decode {ot:.2f} (probe {bw:.1f} GB/s, roofline {roof:.2f}, paired "
                  f"{paired:.2f}) | prefill {op / lp:.2f}x, decode {ot / lt:.2f}x")
        if pairs:
            print(f"{ours_name} medians: prefill {statistics.median(p for p, _ in pairs):.2f}x, "
                  f"decode {statistics.median(d for _, d in pairs):.2f}x")
    for i in rounds(out, "llama-d4096-{}.json"):
        _, lt = llama(os.path.join(out, f"llama-d4096-{i}.json"))
        line = f"after 4096 tokens {i}: llama.cpp Q8_0 {lt:.2f}"
        for kv in ["int8", "bf16"]:
            _, ot, _, paired, bw = ours(os.path.join(out, f"ours-d4096-{kv}-{i}.json"))
            line += f" | {kv} KV {ot:.2f} ({ot / lt:.2f}x, probe {bw:.1f} GB/s, paired {paired:.2f})"
        print(line)
    prefill_at_depth(out)


def prefill_at_depth(out):
    """PD_ROUNDS' pairs: llama.cpp's prefill after a real fill against gattn-cpu's after a synthetic
    one, each gattn-cpu run against the llama.cpp run just before it (same FA setting)."""
    pairs = {}
    for path in sorted(glob.glob(os.path.join(out, "llama-p*-d*-fa*-*.json"))):
        m = re.fullmatch(r"llama-(p\d+-d\d+)-fa(\d)-(\d+)\.json", os.path.basename(path))
        if m:
            pairs[(m[1], int(m[3]), m[2])] = llama(path)[0]
    ratios = {}
    for (pd, i, fa), lp in sorted(pairs.items()):
        line = f"prefill {pd} round {i}: llama.cpp Q8_0 fa {fa} {lp:.2f}"
        for kv in ["bf16", "int8"]:
            path = os.path.join(out, f"ours-{pd}-fa{fa}-{kv}-{i}.json")
            if os.path.exists(path):
                op = ours(path)[0]
                ratios.setdefault((pd, fa, kv), []).append(op / lp)
                line += f" | int8 weights, {kv} KV {op:.2f} ({op / lp:.2f}x)"
        print(line)
    for (pd, fa, kv), r in sorted(ratios.items()):
        print(f"prefill {pd} medians: {kv} KV against fa {fa}: {statistics.median(r):.2f}x ({len(r)} pairs)")


if __name__ == "__main__":
    main(sys.argv[1])
