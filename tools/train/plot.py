"""Plot the three variants' loss curves (loss_<variant>.csv, then loss_<variant>_stage2.csv) into
loss_curves.png: all tokens, the retrieval answers, and the copy targets of the warm-up, by step.

Steps, not tokens, on the x axis: the phases use rows of 128, 512 and 1024 tokens, and what a
phase changes (the copy step appearing, the answers following) happens at a step count.
"""

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent
# Phase boundaries of the recipe in README.md (steps; stage 2 starts at 4000).
PHASES = [3000, 4000, 9000, 9600]


def smooth(xs, k=50):
    out, acc = [], []
    for x in xs:
        acc.append(x)
        acc = acc[-k:]
        out.append(sum(acc) / len(acc))
    return out


def segments(points):
    """Splits (step, value) points at long runs of missing steps (a phase without that kind of
    token); a few missing steps (a batch that happened to hold none) do not split."""
    out = []
    for p in points:
        if out and p[0] <= out[-1][-1][0] + 50:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def rows_of(variant):
    rows = list(csv.DictReader(open(HERE / f"loss_{variant}.csv")))
    stage2 = HERE / f"loss_{variant}_stage2.csv"
    if stage2.exists():
        offset = int(rows[-1]["step"])
        for r in csv.DictReader(open(stage2)):
            r["step"] = str(int(r["step"]) + offset)
            rows.append(r)
    return rows


def main():
    columns = [
        ("loss", "all tokens"),
        ("answer_loss", "retrieval answers (` 1234567.`)"),
        ("copy_loss", "copy targets (warm-up phases)"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for variant, color in zip(("baseline", "headwise", "elementwise"), ("C0", "C1", "C2")):
        rows = rows_of(variant)
        for ax, (col, _) in zip(axes, columns):
            points = [(int(r["step"]), float(r[col])) for r in rows if r.get(col, "nan") != "nan"]
            for i, seg in enumerate(segments(points)):
                ax.plot([s for s, _ in seg], smooth([v for _, v in seg]), color=color,
                        label=variant if i == 0 else None, lw=1)
    for ax, (_, title) in zip(axes, columns):
        ax.set_title(f"loss on {title}, nats/byte, 50-step mean", fontsize=9)
        for p in PHASES:
            ax.axvline(p, color="gray", ls=":", lw=1)
        ax.set_xlabel("step")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "loss_curves.png", dpi=110)


if __name__ == "__main__":
    main()
