"""Quick Python evaluation of exported models: needle retrieval accuracy by length and the
attention sink (mean attention probability on the first token) per layer.

Retrieval is scored teacher-forced: a sample counts as correct when the argmax at every
answer position is the answer byte, which is exactly when greedy decoding reproduces the
answer. Samples come from data.py with a held-out seed.
"""

import argparse
import json
from pathlib import Path

import torch

from data import Generator
from model import Config, GatedQwen3
from verify import load_exported

KINDS = ("single_noise", "single_essay", "multikey_essay")


def make_sample(gen, kind, length):
    """A niah prompt of at most `length` tokens (prompt + answer)."""
    budget = length
    while True:
        p, a = gen.niah(budget, kind)
        if len(p.encode()) + len(a.encode()) <= length or budget < 100:
            return p, a
        budget = int(budget * 0.92)


@torch.no_grad()
def retrieval(model, kind, length, n, seed):
    gen = Generator(seed)
    correct, digits = 0, 0.0
    for _ in range(n):
        p, a = make_sample(gen, kind, length)
        # Score the 7 digits after the prefix (" 1234567."): the needle value itself.
        pi, ai = list(p.encode()), list(a.encode())[:8]
        ids = torch.tensor([pi + ai])
        logits = model(ids)[0]
        pred = logits[len(pi) - 1 : len(pi) - 1 + len(ai)].argmax(-1).tolist()
        correct += pred == ai
        digits += sum(x == y for x, y in zip(pred[1:], ai[1:])) / 7
    return {"exact": correct / n, "digits": round(digits / n, 3)}


@torch.no_grad()
def sink_share(model, n, seed, length=1024):
    """Mean over heads, query positions >= 1 and samples of the attention on token 0."""
    gen = Generator(seed)
    per_layer = torch.zeros(model.cfg.num_hidden_layers)
    for _ in range(n):
        p, a = gen.sample(length)
        ids = torch.tensor([list((p + a).encode())[:length]])
        _, probs = model(ids, return_probs=True)
        for i, pr in enumerate(probs):
            per_layer[i] += pr[0, :, 1:, 0].mean()
    return (per_layer / n).tolist()


def load(path: str):
    """An exported model directory, or a train.py checkpoint (.pt)."""
    if path.endswith(".pt"):
        ckpt = torch.load(path, map_location="cpu")
        model = GatedQwen3(Config(**ckpt["config"]))
        model.load_state_dict(ckpt["state_dict"])
        return model.eval()
    return load_exported(Path(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("-n", type=int, default=40)
    ap.add_argument("--lengths", default="256,512,1024")
    ap.add_argument("--seed", type=int, default=987654)
    ap.add_argument("--json", default=None)
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = {}
    for path in args.models:
        model = load(path)
        r = {"retrieval": {}, "sink": sink_share(model, 8, args.seed + 1)}
        for kind in args.kinds.split(","):
            r["retrieval"][kind] = {L: retrieval(model, kind, int(L), args.n, args.seed) for L in args.lengths.split(",")}
        results[path] = r
        print(path, json.dumps(r), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
