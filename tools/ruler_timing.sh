#!/bin/bash
# Timed RULER run before/after a kernel change, and the check that the answers did not move
# (issue 25; figures in docs/performance.md):
#   tools/ruler_timing.sh run BIN OUT [THREADS]   # the fixed command below, timed; OUT must be new
#   tools/ruler_timing.sh compare BEFORE AFTER    # scores, predictions and times side by side
# `run` runs BIN ruler -m builtin:elementwise --tasks niah_single_1,niah_single_2,niah_multikey_2,vt
# --lengths 32K -n 1 --rope-scaling yarn:32 -t THREADS (default 1) under /usr/bin/time -v, with
# `uptime` before and after, into OUT; OUT.timing.txt keeps the binary's SHA-256, the loads and
# time's report. Overrides (a quick test, another plan): RULER_MODEL, RULER_TASKS, RULER_LENGTH,
# RULER_SCALING, RULER_SAMPLES, RULER_EXTRA (more ruler flags, e.g. "--shard 1/2"). `compare`
# exits 0 when both runs hold the same samples with the same prompts and the same predictions,
# 1 otherwise (each differing sample is named).
set -euo pipefail

usage() { sed -n '2,12p' "$0" >&2; exit 2; }

run() {
    local bin=$1 out=$2 threads=${3:-1}
    [[ -x "$bin" ]] || { echo "ruler_timing: $bin is not an executable" >&2; exit 2; }
    # A resumed run would time only the missing samples.
    [[ ! -e "$out" ]] || { echo "ruler_timing: $out exists; give a new directory" >&2; exit 2; }
    local cmd=("$bin" ruler -m "${RULER_MODEL:-builtin:elementwise}"
        --tasks "${RULER_TASKS:-niah_single_1,niah_single_2,niah_multikey_2,vt}"
        --lengths "${RULER_LENGTH:-32K}" -n "${RULER_SAMPLES:-1}"
        --rope-scaling "${RULER_SCALING:-yarn:32}" -t "$threads" --no-progress --out "$out")
    # shellcheck disable=SC2206 # RULER_EXTRA is a list of flags
    cmd+=(${RULER_EXTRA:-})
    local timing=$out.timing.txt
    {
        echo "command: ${cmd[*]}"
        echo "binary sha256: $(sha256sum "$bin" | cut -d' ' -f1)"
        echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cpus"
        echo "start: $(date -u +%FT%TZ) load: $(uptime | sed 's/.*load average: //')"
    } > "$timing"
    /usr/bin/time -v -o "$timing.time" "${cmd[@]}"
    {
        echo "end: $(date -u +%FT%TZ) load: $(uptime | sed 's/.*load average: //')"
        cat "$timing.time"
    } >> "$timing"
    rm "$timing.time"
    summary "$out"
}

# One line of figures from OUT.timing.txt and OUT/predictions.jsonl.
summary() {
    python3 - "$1" <<'PY'
import json, re, sys
out = sys.argv[1]
t = open(out + ".timing.txt").read()
def field(name):
    return re.search(re.escape(name) + r": (.*)", t).group(1).strip()
recs = [json.loads(l) for l in open(out + "/predictions.jsonl") if l.strip()]
prefill = sum(r["timings"]["prefill_ms"] for r in recs) / 1e3
decode = sum(r["timings"]["decode_ms"] for r in recs) / 1e3
print(f"{out}: {len(recs)} samples, wall {field('Elapsed (wall clock) time (h:mm:ss or m:ss)')}, "
      f"user {field('User time (seconds)')} s, sys {field('System time (seconds)')} s, "
      f"max RSS {int(field('Maximum resident set size (kbytes)')) / 1024:.0f} MiB, "
      f"prefill {prefill:.1f} s + decode {decode:.1f} s (wall, summed over samples); "
      f"load at start {field('start').split('load: ')[1]}, at end {field('end').split('load: ')[1]}")
PY
}

compare() {
    local before=$1 after=$2
    for d in "$before" "$after"; do
        [[ -f "$d/predictions.jsonl" ]] || { echo "ruler_timing: no $d/predictions.jsonl" >&2; exit 2; }
        if [[ -f "$d.timing.txt" ]]; then summary "$d"; fi
    done
    python3 - "$before" "$after" <<'PY'
import json, re, sys
from collections import defaultdict
before, after = sys.argv[1], sys.argv[2]
def load(d):
    recs = {}
    for l in open(d + "/predictions.jsonl"):
        if l.strip():
            r = json.loads(l)
            recs[(r["task"], r["length"], r["index"])] = r
    return recs
a, b = load(before), load(after)
bad = 0
for k in sorted(set(a) ^ set(b)):
    print(f"only in {before if k in a else after}: {k}"); bad += 1
scores = defaultdict(lambda: [0.0, 0.0, 0])
for k in sorted(set(a) & set(b)):
    ra, rb = a[k], b[k]
    s = scores[k[:2]]; s[0] += ra["score"]; s[1] += rb["score"]; s[2] += 1
    if ra["prompt_hash"] != rb["prompt_hash"]:
        print(f"{k}: different prompts (prompt_hash)"); bad += 1; continue
    pa, pb = ra["prediction"], rb["prediction"]
    if pa != pb or ra["stop"] != rb["stop"]:
        at = next((i for i, (x, y) in enumerate(zip(pa, pb)) if x != y), min(len(pa), len(pb)))
        print(f"{k}: predictions differ from character {at} (score {ra['score']} -> {rb['score']}, "
              f"stop {ra['stop']} -> {rb['stop']}):\n  before {pa!r}\n  after  {pb!r}")
        bad += 1
print("| task | length | samples | score before (%) | score after (%) |\n| --- | --- | ---: | ---: | ---: |")
for (task, length), (sa, sb, n) in sorted(scores.items()):
    print(f"| {task} | {length} | {n} | {sa / n:.1f} | {sb / n:.1f} |")
def user(d):
    try:
        return float(re.search(r"User time \(seconds\): (\S+)", open(d + ".timing.txt").read()).group(1))
    except (OSError, AttributeError):
        return None
ua, ub = user(before), user(after)
if ua and ub:
    print(f"user CPU time: before {ua:.1f} s, after {ub:.1f} s, after/before {ub / ua:.3f}")
print("predictions: all equal" if bad == 0 else f"predictions: {bad} sample(s) differ (above)")
sys.exit(1 if bad else 0)
PY
}

case "${1:-}" in
    run) [[ $# -ge 3 && $# -le 4 ]] || usage; shift; run "$@" ;;
    compare) [[ $# -eq 3 ]] || usage; shift; compare "$@" ;;
    *) usage ;;
esac
