"""Synthetic long-context training text in RULER's formats (crates/eval/src/templates.rs),
generated on the fly and deterministic from a seed.

Tokens are bytes (the engine's byte-level tokenizer: id = byte value, 256 = <|endoftext|>),
so a sample is `list(text.encode())`. Each sample is RULER's `input + answer_prefix` followed
by the answer; the answer bytes get a larger loss weight.
"""

import random
import re
from pathlib import Path

import numpy as np

EOS = 256
DATA = Path(__file__).resolve().parents[2] / "crates" / "eval" / "data"

NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "One of the special magic {type_v} for {key} is: {value}."
NIAH_TEMPLATE = (
    "Some special magic {type_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_v} afterwards.\n{context}\n"
    "What are all the special magic {type_v} for {query} mentioned in the provided text?"
)
NIAH_PREFIX = " The special magic {type_v} for {query} mentioned in the provided text are"
VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above."
)
VT_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} variables "
    "are assgined the value {query}, they are: "
)
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def singular(text: str) -> str:
    """RULER's rewrite when one value is asked for (same order as niah.rs)."""
    return text.replace("Some", "A").replace("are all", "is").replace("are", "is").replace("answers", "answer")


def fill(template: str, **fields) -> str:
    out = template
    for k, v in fields.items():
        out = out.replace("{" + k + "}", v)
    return out


def _lines(name):
    return [w.strip() for w in (DATA / name).read_text().splitlines() if w.strip()]


class Corpus:
    def __init__(self):
        text = (DATA / "austen_essays.txt").read_text()
        self.words = re.sub(r"\s+", " ", text).strip().split(" ")
        self.adjectives = _lines("adjectivelist.txt")
        self.nouns = _lines("nounlist.txt")
        # Sentence starts: after a word ending in . ! ? followed by a capitalised word.
        self.sentence_starts = [0] + [
            i + 1
            for i in range(len(self.words) - 1)
            if self.words[i][-1:] in ".!?\"" and self.words[i + 1][:1].isupper()
        ]


# (niah, vt, prose, drill[, copy]) shares of the samples, and the chance a row's sample fills the
# whole room.
MIXES = {
    "base": ((0.45, 0.25, 0.30, 0.0), 0.4),
    # Stage 2: denser retrieval, many short samples per row (more answers per step).
    "retrieval": ((0.70, 0.20, 0.10, 0.0), 0.15),
    # Curriculum: short retrieval drills only (several needles, several answers per sample).
    "drill": ((0.0, 0.0, 0.1, 0.9), 0.0),
    "drill_mixed": ((0.35, 0.15, 0.05, 0.45), 0.15),
    # Warm-up for the copy step: repeated random strings (an induction head's whole job) beside drills.
    "copy": ((0.0, 0.0, 0.05, 0.35, 0.6), 0.0),
}
DRILL_HEADER = (
    "A special magic number is hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the number afterwards.\n"
)
DRILL_QUESTION = "What is the special magic number for {key} mentioned in the provided text?"
DRILL_PREFIX = " The special magic number for {key} mentioned in the provided text is"


class Generator:
    def __init__(self, seed: int, corpus: Corpus | None = None, mix: str = "base"):
        self.rng = random.Random(seed)
        self.c = corpus or Corpus()
        shares, self.full_room = MIXES[mix]
        self.shares, self.copy_share = shares[:4], (shares[4] if len(shares) > 4 else 0.0)

    # ---- pieces -------------------------------------------------------------------------
    def word_key(self):
        return f"{self.rng.choice(self.c.adjectives)}-{self.rng.choice(self.c.nouns)}"

    def number(self):
        return str(self.rng.randint(1_000_000, 9_999_999))

    def prose_sentences(self, n_bytes):
        """Whole Austen sentences from a random sentence start, about n_bytes long."""
        r = self.rng
        s = r.choice(self.c.sentence_starts) if r.random() < 0.8 else 0
        out, size, i = [], 0, s
        starts = []
        while size < n_bytes:
            w = self.c.words[i % len(self.c.words)]
            out.append(w)
            size += len(w.encode()) + 1
            i += 1
        # split into sentences at capitalised words after end punctuation
        sents, cur = [], []
        for w in out:
            cur.append(w)
            if w[-1:] in ".!?" and len(cur) > 3:
                sents.append(" ".join(cur))
                cur = []
        if cur:
            sents.append(" ".join(cur))
        return sents

    # ---- tasks ---------------------------------------------------------------------------
    def niah(self, budget, kind=None):
        """One of RULER's niah variants at about `budget` bytes. Returns (prompt, answer)."""
        r = self.rng
        kind = kind or r.choices(["single_noise", "single_essay", "multikey_essay", "multikey_needle",
                          "multivalue", "multiquery"], weights=[3, 3, 2, 1, 1, 1])[0]
        n_keys = {"multikey_essay": r.randint(2, 4), "multikey_needle": 1, "multiquery": r.randint(2, 3)}.get(kind, 1)
        n_vals = r.randint(2, 3) if kind == "multivalue" else 1
        keys = []
        while len(keys) < n_keys:
            k = self.word_key()
            if k not in keys:
                keys.append(k)
        values = [[self.number() for _ in range(n_vals)] for _ in keys]
        needles = [fill(NEEDLE, type_v="numbers", key=k, value=v) for k, vs in zip(keys, values) for v in vs]
        r.shuffle(needles)
        n_query = 2 if kind == "multiquery" else 1
        queried = sorted(r.sample(range(n_keys), n_query)) if kind == "multiquery" else [r.randrange(n_keys)]
        qkeys = [keys[i] for i in queried]
        query = qkeys[0] if len(qkeys) == 1 else ", ".join(qkeys[:-1]) + ", and " + qkeys[-1]
        single = n_query * n_vals == 1
        template, prefix, type_v = NIAH_TEMPLATE, NIAH_PREFIX, "numbers"
        if single:
            template, prefix, type_v = singular(template), singular(prefix), "number"
        shell = len(fill(template, type_v=type_v, context="", query=query)) + len(prefix) + 40
        room = max(budget - shell - sum(len(n) + 1 for n in needles), 100)
        if kind == "single_noise" or kind == "multivalue" and r.random() < 0.5:
            units = [NOISE] * max(len(needles), room // (len(NOISE) + 1))
            sep = "\n"
        elif kind == "multikey_needle":
            units = []
            size = 0
            while size < room or len(units) < len(needles):
                k = self.word_key()
                if k in keys:
                    continue
                u = fill(NEEDLE, type_v="numbers", key=k, value=self.number())
                units.append(u)
                size += len(u) + 1
            sep = "\n"
        else:
            units = self.prose_sentences(room)
            sep = " "
        positions = sorted((r.randint(0, len(units)) for _ in needles), reverse=True)
        for p, nd in zip(positions, needles):
            units.insert(p, nd)
        context = sep.join(units)
        # Answer values in the order they appear in the text (RULER scores by containment).
        order = {nd: i for i, nd in enumerate(units) if nd in needles}
        prompt = fill(template, type_v=type_v, context=context, query=query) + fill(prefix, type_v=type_v, query=query)
        answer_vals = []
        for i in queried:
            key_needles = sorted(
                (fill(NEEDLE, type_v="numbers", key=keys[i], value=v), v) for v in values[i]
            )
            answer_vals += [v for _, v in sorted(key_needles, key=lambda t: order[t[0]])]
        answer = " " + ", ".join(answer_vals) + "."
        return prompt, answer

    def vt_chain(self, hops, name_len=5, value=None):
        names = []
        while len(names) < hops + 1:
            n = "".join(self.rng.choice(UPPER) for _ in range(name_len))
            if n != "VAR" and n not in names:
                names.append(n)
        value = value or str(self.rng.randint(10_000, 99_998))
        links = [f"VAR {names[0]} = {value}"] + [f"VAR {names[j + 1]} = VAR {names[j]} " for j in range(hops)]
        return names, value, links

    def vt_block(self, budget, hops):
        r = self.rng
        names, value, links = self.vt_chain(hops)
        chains = [links]
        # RULER's vt has one chain; sometimes add a distractor chain.
        if r.random() < 0.3:
            chains.append(self.vt_chain(hops)[2])
        shell = len(VT_TEMPLATE) + len(VT_PREFIX) + 40
        n_lines = max(hops + 1, (budget - shell) // (len(NOISE) + 1))
        lines = [NOISE] * n_lines
        for ch in chains:
            pos = sorted(r.sample(range(len(lines)), len(ch)))
            for j, (p, link) in enumerate(zip(pos, ch)):
                lines.insert(p + j, link)
        context = "\n".join(lines).replace(". \n", ".\n")
        prompt = fill(VT_TEMPLATE, context=context, query=value) + fill(VT_PREFIX, num_v=str(hops + 1), query=value)
        return prompt, " ".join(names)

    def vt(self, budget):
        hops = self.rng.choice([1, 2, 3, 4, 4])
        if self.rng.random() < 0.3 and budget > 1200:
            # RULER prepends a one-shot example: "{input}{prefix} {answer}\n" then "\n{input}".
            ex_p, ex_a = self.vt_block(min(500, budget // 3), hops)
            p, a = self.vt_block(budget - len(ex_p) - len(ex_a) - 2, hops)
            return f"{ex_p} {ex_a}\n\n{p}", a
        return self.vt_block(budget, hops)

    def prose(self, budget):
        return " ".join(self.prose_sentences(budget)), ""

    def drill(self, budget):
        """A short, dense retrieval drill in RULER's niah wording: 1-4 needles among a few noise
        lines or prose sentences, then questions for some keys, each answered. Returns segments
        [(text, is_answer)] so every answer value gets the answer weight."""
        r = self.rng
        n_keys = r.choice([1, 2, 2, 3, 3, 4])
        keys = []
        while len(keys) < n_keys:
            k = self.word_key()
            if k not in keys:
                keys.append(k)
        values = [self.number() for _ in keys]
        units = [fill(NEEDLE, type_v="numbers", key=k, value=v) for k, v in zip(keys, values)]
        used = sum(len(u) + 1 for u in units) + 90 * n_keys
        room = max(0, budget - used)
        if room > 0:
            if r.random() < 0.5:
                filler = [NOISE] * (room // (len(NOISE) + 1))
            else:
                filler = self.prose_sentences(room)
            for f in filler:
                units.insert(r.randint(0, len(units)), f)
        head = DRILL_HEADER if r.random() < 0.3 else ""
        segs = [(head + "\n".join(units) + "\n", False)]
        asked = r.sample(range(n_keys), r.randint(1, n_keys))
        for j, i in enumerate(asked):
            # Sometimes the question in full (as RULER asks it), else the answer prefix alone (denser).
            q = DRILL_QUESTION.replace("{key}", keys[i]) if r.random() < (0.4 if j == 0 else 0.2) else ""
            segs.append(((q + DRILL_PREFIX.replace("{key}", keys[i])).lstrip(" "), False))
            segs.append((" " + values[i] + ".", True))
            segs.append(("\n", False))
        return segs

    def copy(self, budget):
        """A run of random strings (digit groups, RULER-style word keys, letter names), then the
        same run again: everything after the repeat's first byte is predictable only by copying.
        Returns segments; the repeat is tagged "copy"."""
        r = self.rng
        pieces, size = [], 0
        target = r.randint(8, max(9, min(48, budget // 2 - 10)))
        while size < target:
            kind = r.random()
            if kind < 0.25:
                p = self.number()
            elif kind < 0.45:
                p = self.word_key()
            else:
                p = "".join(r.choice(UPPER) for _ in range(r.randint(3, 8)))
            pieces.append(p)
            size += len(p) + 1
        run = " ".join(pieces)
        gap = r.randint(0, max(0, budget - 2 * len(run) - 4))
        segs = [(run + "\n", False)]
        if gap >= 30:
            if r.random() < 0.5:
                filler = " ".join(self.prose_sentences(gap))
            else:
                filler = " ".join([NOISE] * max(1, gap // (len(NOISE) + 1)))
            segs.append((filler + "\n", False))
        segs += [(run[:1], False), (run[1:], "copy"), ("\n", False)]
        return segs

    def sample(self, budget):
        if self.copy_share and self.rng.random() < self.copy_share:
            return self.copy(budget)
        niah, vt, _, drill = self.shares
        # (No draw for drills in mixes without them: the base/retrieval streams stay as trained.)
        if drill and self.rng.random() < drill:
            return self.drill(budget)
        r = self.rng.random() * (1 - drill)
        if r < niah:
            return self.niah(budget)
        if r < niah + vt:
            return self.vt(budget)
        return self.prose(budget)


# Per-token tags, so the log can tell retrieval answers from copy targets.
TAG_TEXT, TAG_ANSWER, TAG_COPY = 0, 1, 2


def encode(prompt: str, answer: str, answer_weight: float):
    p, a = list(prompt.encode()), list(answer.encode())
    ids = p + a + [EOS]
    w = [1.0] * len(p) + [answer_weight] * (len(a) + 1)
    tags = [TAG_TEXT] * len(p) + [TAG_ANSWER] * (len(a) + 1)
    return ids, w, tags


def encode_segments(segs, answer_weight: float):
    ids, w, tags = [], [], []
    for text, kind in segs:
        b = list(text.encode())
        ids += b
        w += [answer_weight if kind else 1.0] * len(b)
        tags += [TAG_COPY if kind == "copy" else TAG_ANSWER if kind else TAG_TEXT] * len(b)
    return ids + [EOS], w + [1.0], tags + [TAG_TEXT]


def encode_any(sample, answer_weight: float):
    return encode_segments(sample, answer_weight) if isinstance(sample, list) else encode(*sample, answer_weight)


def sample_len(sample):
    if isinstance(sample, list):
        return sum(len(t.encode()) for t, _ in sample) + 1
    return len(sample[0].encode()) + len(sample[1].encode()) + 1


def make_row(gen: Generator, length: int, answer_weight: float):
    """A packed row of length+1 tokens (inputs and shifted targets), with loss weights and tags."""
    ids, ws, tags = [], [], []
    while len(ids) < length + 1:
        room = length + 1 - len(ids)
        drills = gen.shares[3] > 0 or gen.copy_share > 0
        low = 80 if drills else 200  # drills fit in short rows
        if room < low:
            smp = gen.prose(room + 50)
        else:
            budget = room if gen.rng.random() < gen.full_room else gen.rng.randint(min(low, room), room)
            smp = gen.sample(budget)
            while sample_len(smp) > room and budget > (60 if drills else 150):
                budget = int(budget * 0.85)
                smp = gen.sample(budget)
        i, w, t = encode_any(smp, answer_weight)
        ids += i
        ws += w
        tags += t
    return ids[: length + 1], ws[: length + 1], tags[: length + 1]


def batch(gen: Generator, batch_size: int, length: int, answer_weight: float):
    rows = [make_row(gen, length, answer_weight) for _ in range(batch_size)]
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    w = np.array([r[1] for r in rows], dtype=np.float32)
    tags = np.array([r[2] for r in rows], dtype=np.int64)
    return ids[:, :-1], ids[:, 1:], w[:, 1:], tags[:, 1:]


if __name__ == "__main__":
    g = Generator(0)
    for f in (g.niah, g.vt, g.prose):
        p, a = f(700)
        print(repr(p[-400:]), "=>", repr(a), len(p.encode()))
    import time
    t = time.time()
    x, y, w, tags = batch(g, 8, 1024, 5.0)
    print(x.shape, time.time() - t, x.max())
