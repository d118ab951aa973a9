#!/usr/bin/env bash
# Benchmark llama.cpp on the GGUFs written by convert.sh, 2 threads, as issue 5 states its targets.
# Usage: tools/peers/llama_cpp/bench.sh GGUF_DIR [RESULTS.json]
#   GGUF_DIR holds model-q8_0.gguf and model-bf16.gguf; results default to
#   GGUF_DIR/llama-bench-<UTC time>.json (one JSON list of llama-bench records, plus load averages).
# Runs, each with -r 3 (plus llama-bench's warmup), flash attention off and on (-fa 0,1):
#   1. prefill 512 and decode 128 from an empty cache (-p 512 -n 128)
#   2. decode 128 after 4096 cached tokens (-p 0 -n 128 -d 4096); the 4096-token fill is not timed
# Environment: THREADS (2), REPS (3), DEPTH (4096), N_GEN (128), FA ("0,1"), MODELS ("q8_0 bf16"),
#   RUNS ("empty depth": which of the two runs to do).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '3,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
GGUF_DIR=$1
RESULTS=${2:-$GGUF_DIR/llama-bench-$(date -u +%Y%m%dT%H%M%SZ).json}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
DEPTH=${DEPTH:-4096}
N_GEN=${N_GEN:-128}
FA=${FA:-0,1}
require_setup

model_args=()
for m in ${MODELS:-q8_0 bf16}; do
    f=$GGUF_DIR/model-$m.gguf
    if [ ! -f "$f" ]; then
        echo "error: $f not found; run tools/peers/llama_cpp/convert.sh first" >&2
        exit 1
    fi
    model_args+=(-m "$f")
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# shellcheck disable=SC2206 # LLAMA_BENCH_ARGS is a list of flags (env.sh)
common=("${model_args[@]}" -t "$THREADS" -r "$REPS" -fa "$FA" -o json $LLAMA_BENCH_ARGS)

RUNS=${RUNS:-empty depth}
runs=()
echo "load average before: $(loadavg)" | tee "$tmp/load"
for run in $RUNS; do
    case "$run" in
        empty) args=(-p 512 -n "$N_GEN") ;;
        depth) args=(-p 0 -n "$N_GEN" -d "$DEPTH") ;;
        *) echo "error: RUNS: unknown run '$run' (expected empty, depth)" >&2; exit 2 ;;
    esac
    "$BIN_DIR/llama-bench" "${common[@]}" "${args[@]}" >"$tmp/$run.json" 2>"$tmp/$run.err" \
        || { tail -20 "$tmp/$run.err"; exit 1; }
    echo "load average after run '$run': $(loadavg)" | tee -a "$tmp/load"
    runs+=("$tmp/$run.json")
done
"$PY" "$HERE/bench_table.py" --load "$tmp/load" --out "$RESULTS" "${runs[@]}"
