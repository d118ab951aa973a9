"""Train one gate variant of the tiny Qwen3 on the synthetic RULER-style mix (data.py).

Same seed, data stream and step budget for every variant: the data generator's seed and the
weight-init seed are fixed by --seed, so the variants see identical batches.
"""

import argparse
import csv
import math
import os
import time

import torch
import torch.nn.functional as F

from data import TAG_ANSWER, TAG_COPY, Corpus, Generator, batch
from model import GATES, Config, GatedQwen3


def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def parse_curriculum(spec, steps, seq, batch_size, mix):
    """"SEQxBATCH:MIX:STEPS,..." (the last phase's STEPS may be "rest") -> [(seq, batch, mix, steps)].
    Without a spec, one phase of the plain flags."""
    if not spec:
        return [(seq, batch_size, mix, steps)]
    phases, used = [], 0
    for part in spec.split(","):
        shape, phase_mix, n = part.split(":")
        s, b = (int(v) for v in shape.split("x"))
        n = steps - used if n == "rest" else int(n)
        phases.append((s, b, phase_mix, n))
        used += n
    return phases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=GATES, required=True)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--answer-weight", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 when variants train side by side)")
    ap.add_argument("--stop-at", type=int, default=None,
                    help="save and stop after this many steps; the lr schedule still spans --steps")
    ap.add_argument("--max-minutes", type=float, default=40.0, help="stop early (and say so) past this")
    ap.add_argument("--out", default="checkpoints")
    ap.add_argument("--log", default=None)
    ap.add_argument("--mix", default="base", help="data mix of data.MIXES")
    ap.add_argument("--resume", default=None, help="start from this checkpoint's weights (fresh optimizer)")
    ap.add_argument("--tag", default="", help="suffix of the checkpoint and log names")
    ap.add_argument("--curriculum", default=None,
                    help='phases "SEQxBATCH:MIX:STEPS,...", e.g. "512x8:drill:250,1024x4:drill_mixed:rest"')
    args = ap.parse_args()
    phases = parse_curriculum(args.curriculum, args.steps, args.seq, args.batch, args.mix)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    cfg = Config(gate=args.variant, max_position_embeddings=max(p[0] for p in phases))
    model = GatedQwen3(cfg)
    if args.resume:
        model.load_state_dict(torch.load(args.resume, map_location="cpu")["state_dict"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95),
    )
    corpus = Corpus()
    # Phase i's data seed is seed + i, so phases do not repeat each other's samples.
    gens = [Generator(args.seed + i, corpus, m) for i, (_, _, m, _) in enumerate(phases)]
    schedule = [(s, b, g) for (s, b, _, n), g in zip(phases, gens) for _ in range(n)]
    os.makedirs(args.out, exist_ok=True)
    log_path = args.log or os.path.join(os.path.dirname(__file__), f"loss_{args.variant}{args.tag}.csv")
    ckpt = os.path.join(args.out, f"{args.variant}{args.tag}.pt")
    print(f"{args.variant}: {model.num_parameters()} parameters, phases (seq, batch, mix, steps) {phases}",
          flush=True)

    def save(steps_done):
        torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict(), "step": steps_done}, ckpt)

    start = time.time()
    with open(log_path, "w", newline="") as f:
        log = csv.writer(f)
        log.writerow(["step", "tokens", "seconds", "lr", "loss", "answer_loss", "copy_loss"])
        tokens = 0
        for step, (seq, bsz, gen) in enumerate(schedule):
            x, y, w, tags = (torch.from_numpy(a) for a in batch(gen, bsz, seq, args.answer_weight))
            tokens += bsz * seq
            lr = lr_at(step, len(schedule), args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            logits = model(x)
            per_tok = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1), reduction="none")
            wf = w.reshape(-1)
            loss = (per_tok * wf).sum() / wf.sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            plain = per_tok.mean().item()
            tf = tags.reshape(-1)
            ans, cp = tf == TAG_ANSWER, tf == TAG_COPY
            ans_loss = per_tok[ans].mean().item() if ans.any() else float("nan")
            copy_loss = per_tok[cp].mean().item() if cp.any() else float("nan")
            elapsed = time.time() - start
            log.writerow([step + 1, tokens, f"{elapsed:.1f}", f"{lr:.6f}",
                          f"{plain:.4f}", f"{ans_loss:.4f}", f"{copy_loss:.4f}"])
            f.flush()
            if step % 10 == 0 or step == len(schedule) - 1:
                print(f"step {step + 1} loss {plain:.4f} answer {ans_loss:.4f} copy {copy_loss:.4f} "
                      f"{elapsed:.0f}s", flush=True)
            if (step + 1) % 50 == 0 or step == len(schedule) - 1:
                save(step + 1)
            if args.stop_at and step + 1 >= args.stop_at:
                print(f"stopped at step {step + 1} (--stop-at)", flush=True)
                save(step + 1)
                break
            if elapsed > args.max_minutes * 60:
                print(f"time cap reached after {step + 1} steps", flush=True)
                save(step + 1)
                break
    print(f"done: {time.time() - start:.0f}s wall", flush=True)


if __name__ == "__main__":
    main()
