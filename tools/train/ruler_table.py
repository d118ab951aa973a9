"""One table and one chart from per-length `gattn-cpu ruler` runs of the tiny models.

Each length needs its own `--rope-scaling yarn:F` (F = length / 1024), and a ruler output
directory holds one setting, so the runs live in ROOT/<variant>/<length>/ and `ruler compare`
(one setting per run) cannot join them; this script reads their predictions.jsonl files.

    python ruler_table.py ROOT --out ../../docs/tiny_ruler.png
"""

import argparse
import json
import re
from pathlib import Path

VARIANTS = ("baseline", "headwise", "elementwise")


def length_name(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else str(tokens)


def well_formed(task: str, prediction: str) -> bool:
    """The answer has the expected shape: a 7-digit value (niah) or 5-capital names (vt)."""
    if task == "vt":
        return re.match(r"\s*[A-Z]{5}\b", prediction) is not None
    return re.match(r"\s*\d{7}\b", prediction) is not None


def read(root: Path):
    """{(variant, task, length): (mean score in %, samples, well-formed answers)} from every
    predictions.jsonl, so a run cut short still counts the samples it finished."""
    rows = {}
    for v in VARIANTS:
        for preds in (root / v).glob("*/predictions.jsonl"):
            for line in preds.open():
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed run
                rows.setdefault((v, d["task"], d["length"]), []).append(d)
    return {
        k: (sum(d["score"] for d in ds) / len(ds), len(ds), sum(well_formed(k[1], d["prediction"]) for d in ds))
        for k, ds in rows.items()
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--out", default=None, help="chart (png)")
    args = ap.parse_args()
    scores = read(Path(args.root))
    lengths = sorted({k[2] for k in scores})
    tasks = sorted({k[1] for k in scores})
    print("score in % (samples, answers of the right shape)\n")
    print("| variant | task | " + " | ".join(length_name(L) for L in lengths) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in lengths) + " |")
    for v in VARIANTS:
        for t in tasks:
            cells = []
            for L in lengths:
                s = scores.get((v, t, L))
                cells.append(f"{s[0]:.0f} ({s[1]}, {s[2]})" if s else "-")
            print(f"| {v} | {t} | " + " | ".join(cells) + " |")
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 5))
        for v in VARIANTS:
            for t in tasks:
                pts = [(L, scores[(v, t, L)][0]) for L in lengths if (v, t, L) in scores]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=f"{v} {t}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("length (tokens = bytes); YaRN factor length/1024 beyond 1024")
        ax.set_ylabel("RULER score")
        ax.set_ylim(-5, 105)
        ax.set_title("tiny gated Qwen3 (builtin models), gattn-cpu ruler")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
