"""Plot the three loss curves (loss_<variant>.csv) into loss_curves.png."""

import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).resolve().parent


def smooth(xs, k=20):
    out, acc = [], []
    for x in xs:
        acc.append(x)
        acc = acc[-k:]
        out.append(sum(acc) / len(acc))
    return out


def main():
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for variant in ("baseline", "headwise", "elementwise"):
        rows = list(csv.DictReader(open(HERE / f"loss_{variant}.csv")))
        stage1_tokens = int(rows[-1]["tokens"])
        stage2 = HERE / f"loss_{variant}_stage2.csv"
        if stage2.exists():
            # Stage 2 continues from stage 1's weights; its token count starts after stage 1's.
            more = list(csv.DictReader(open(stage2)))
            for r in more:
                r["tokens"] = str(int(r["tokens"]) + stage1_tokens)
            rows += more
        tokens = [int(r["tokens"]) / 1e6 for r in rows]
        axes[0].plot(tokens, smooth([float(r["loss"]) for r in rows]), label=variant)
        ans = [(t, float(r["answer_loss"])) for t, r in zip(tokens, rows) if r["answer_loss"] != "nan"]
        axes[1].plot([t for t, _ in ans], smooth([v for _, v in ans]), label=variant)
    axes[0].set_title("training loss, all tokens (nats/byte, 20-step mean)")
    axes[1].set_title("loss on answer tokens (20-step mean)")
    for ax in axes:
        ax.axvline(stage1_tokens / 1e6, color="gray", ls=":", lw=1)
        ax.set_xlabel("training tokens (M)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "loss_curves.png", dpi=110)


if __name__ == "__main__":
    main()
