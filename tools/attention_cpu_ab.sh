#!/usr/bin/env bash
# Two builds of the one-thread attention bench run in turn, round after round, and the medians of
# their prefill rates and of the per-round ratio new / base (docs/performance.md). On a shared
# host the rate of one run moves by +-20 %; a paired median over tens of rounds resolves ~3 %.
#   tools/attention_cpu_ab.sh BASE_BENCH NEW_BENCH [ROUNDS] [DTYPE]
# BASE_BENCH, NEW_BENCH: copies of `target/release/deps/attention_cpu-*` from the two builds
# (`cargo bench -p gattn-benches --bench attention_cpu --no-run` prints its path); ROUNDS (30);
# DTYPE the cache (bf16). Environment: OFFSET (16384) cached keys, QUERIES (256); any GATTN_*
# setting passes through, e.g. GATTN_AMX_MODEL_SKIP_TILES=1 with benches built with
# `--features gattn-kernels/emulated-amx` to time an AMX kernel without its tile products.
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 4 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
base=$1 new=$2 rounds=${3:-30} dtype=${4:-bf16}
rate() {
    GATTN_BENCH_ATTN_DTYPES=$dtype GATTN_BENCH_CPU_OFFSET=${OFFSET:-16384} \
        GATTN_BENCH_CPU_QUERIES=${QUERIES:-256} "$1" --bench 2>&1 |
        sed -n 's/.*: prefill .*: \([0-9.]*\) GFLOP per CPU-second.*/\1/p' | head -1
}
for round in $(seq 1 "$rounds"); do
    # Which build goes first alternates.
    if [ $((round % 2)) = 1 ]; then a=$(rate "$base"); b=$(rate "$new"); else
        b=$(rate "$new"); a=$(rate "$base"); fi
    [ -n "$a" ] && [ -n "$b" ] || { echo "attention_cpu_ab: a run printed no prefill rate" >&2; exit 1; }
    echo "$a $b"
done | python3 -c '
import statistics as st, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin]
base, new = [r[0] for r in rows], [r[1] for r in rows]
q = lambda xs: "%.0f-%.0f" % (st.quantiles(xs)[0], st.quantiles(xs)[2])
print(f"GFLOP per CPU-second, median of {len(rows)} rounds: base {st.median(base):.1f} "
      f"(quartiles {q(base)}), new {st.median(new):.1f} ({q(new)}); "
      f"new / base, median of the rounds: {st.median([n / b for b, n in rows]):.3f}")'
