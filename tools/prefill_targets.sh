#!/usr/bin/env bash
# Issue 25's prefill measurements on this host, in one resumable run (docs/performance.md says
# what each figure is checked against). Usage:
#   tools/prefill_targets.sh BF16_DIR INT8_DIR OUT_DIR [GGUF_DIR]
#   BF16_DIR: `gattn-cpu init --preset qwen3-1.7b --gate none --dtype bf16 -o BF16_DIR`;
#   INT8_DIR: `gattn-cpu quantize -m BF16_DIR -o INT8_DIR`; GGUF_DIR: `tools/peers/llama_cpp/
#   convert.sh` of BF16_DIR (the llama.cpp step is skipped without it). llama.cpp has no gate,
#   hence `--gate none` for all three; every other step runs gated checkpoints too. Each step's
#   output goes to OUT_DIR/STEP.log and a step that finished leaves OUT_DIR/STEP.done, so a
#   second run does only what is left.
# Steps, in order (STEPS picks some, e.g. STEPS="matmul depth"):
#   tests      the workspace tests with every SIMD feature of this CPU required (GATTN_REQUIRE_SIMD:
#              a test that skips one fails); on AMX, the kernels' tests again with the bf16-tile
#              int8 mat-mat (GATTN_AMX_INT8=bf16)
#   peaks      `gattn-cpu info` and the dot-product peaks (kernels' `peak` example, 3 rounds)
#   matmul     the 512-token mat-mats of every format against the in-run peaks
#   attention  the prefill attention on one thread, 256 queries after 16384 keys, both caches
#   depth      `bench -p 512 -d 32768 --depth-fill synthetic`, both caches (attention against the
#              in-run peak: >= 0.40 of the AMX bf16 peak, else >= 0.50 of the vector one); on AMX
#              once for each int8 mat-mat (GATTN_AMX_INT8 = tdpbssd, bf16)
#   int8       on AMX only: `-p 512` and `-p 8192` with each int8 mat-mat, alternated 3 rounds
#   torch      PyTorch bf16 sdpa in turn with gattn-cpu: 512 and 8192 (2 rounds), 32768 (1, int8 KV)
#   llama      llama.cpp `-p 512 -d 32768` in turn with gattn-cpu (one round, FA off and on)
#   ruler      on AMX only: RULER at 32K (tools/ruler_timing.sh) on the tiles and on the vector
#              kernels (GATTN_SIMD=avx512), then `compare`: the predictions must be equal
#   long       the real 131072-token prefill, int8 KV, under /usr/bin/time -v (about 20 minutes
#              on an AMX host, 1.6 hours on a 2-core Zen 4)
# Environment: GATTN (target/release/gattn-cpu), THREADS (2). Run nothing else meanwhile.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)

if [ $# -lt 3 ] || [ $# -gt 4 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
BF16_DIR=$1 INT8_DIR=$2 OUT=$3 GGUF_DIR=${4:-}
GATTN=${GATTN:-$ROOT/target/release/gattn-cpu}
THREADS=${THREADS:-2}
STEPS=${STEPS:-tests peaks matmul attention depth int8 torch llama ruler long}
for dir in "$BF16_DIR" "$INT8_DIR"; do
    [ -f "$dir/config.json" ] || { echo "prefill_targets: no config.json in $dir" >&2; exit 2; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
(cd "$ROOT" && cargo build --release -p gattn-cli)
# What this CPU has, in GATTN_REQUIRE_SIMD's words: the tests must not skip any of it.
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has=()
for pair in avx2:avx2 avx512f:avx512 avx512_vnni:vnni avx512_bf16:bf16 amx_tile:amx; do
    grep -qw "${pair%%:*}" <<< "$flags" && has+=("${pair#*:}")
done
required=$(IFS=,; echo "${has[*]}")
amx=
[[ ",$required," != *,amx,* ]] || amx=1

bench() { "$GATTN" bench -t "$THREADS" "$@"; }

step_tests() {
    (cd "$ROOT" && GATTN_REQUIRE_SIMD=$required cargo test --workspace)
    if [ -n "$amx" ]; then
        (cd "$ROOT" && GATTN_REQUIRE_SIMD=amx GATTN_AMX_INT8=bf16 cargo test -p gattn-kernels)
    fi
}
step_peaks() {
    "$GATTN" info
    (cd "$ROOT" && cargo run --release -p gattn-kernels --example peak -- 3)
}
step_matmul() {
    (cd "$ROOT" && GATTN_BENCH_MATMUL=matmat cargo bench -p gattn-benches --bench matmul -- \
        --quick matmat512)
}
step_attention() {
    (cd "$ROOT" && GATTN_BENCH_ATTN_DTYPES=bf16,int8 GATTN_BENCH_CPU_OFFSET=16384 \
        GATTN_BENCH_CPU_QUERIES=256 cargo bench -p gattn-benches --bench attention_cpu)
}
step_depth() {
    local mats=default
    [ -z "$amx" ] || mats="tdpbssd bf16"
    for mat in $mats; do
        for kv in bf16 int8; do
            echo "== int8 mat-mat $mat, $kv KV"
            env ${amx:+GATTN_AMX_INT8=$mat} "$GATTN" bench -t "$THREADS" -m "$INT8_DIR" --kv "$kv" \
                -p 512 -d 32768 --depth-fill synthetic -n 1 -r 1 --no-warmup
        done
    done
}
step_int8() {
    [ -n "$amx" ] || { echo "no AMX here: one int8 mat-mat only"; return 0; }
    for round in 1 2 3; do
        order="tdpbssd bf16"
        [ $((round % 2)) = 1 ] || order="bf16 tdpbssd"
        for mat in $order; do
            echo "== round $round, GATTN_AMX_INT8=$mat"
            GATTN_AMX_INT8=$mat bench -m "$INT8_DIR" --kv int8 -p 512 -n 1 -r 3 | grep prefill:
            GATTN_AMX_INT8=$mat bench -m "$INT8_DIR" --kv int8 -p 8192 -n 1 -r 1 --no-warmup |
                grep prefill:
        done
    done
}
step_torch() {
    GATTN=$GATTN ROUNDS=2 PROMPTS="512 8192" N_GEN=8 REPS=2 \
        "$HERE/peers/torch/interleave.sh" "$BF16_DIR" "$INT8_DIR" "$OUT/torch"
    GATTN=$GATTN ROUNDS=1 PROMPTS=32768 N_GEN=4 NO_WARMUP=1 KVS=int8 \
        "$HERE/peers/torch/interleave.sh" "$BF16_DIR" "$INT8_DIR" "$OUT/torch-32768"
}
step_llama() {
    [ -n "$GGUF_DIR" ] || { echo "no GGUF_DIR given: llama.cpp skipped"; return 0; }
    GATTN=$GATTN ROUNDS=0 DEPTH_ROUNDS=0 PD_ROUNDS=1 \
        "$HERE/peers/llama_cpp/interleave.sh" "$GGUF_DIR" "$INT8_DIR" "$BF16_DIR" "$OUT/llama"
}
step_ruler() {
    [ -n "$amx" ] || { echo "no AMX here: nothing to compare the vector kernels with"; return 0; }
    rm -rf "$OUT/ruler-amx" "$OUT/ruler-avx512"
    "$HERE/ruler_timing.sh" run "$GATTN" "$OUT/ruler-amx" "$THREADS"
    GATTN_SIMD=avx512 "$HERE/ruler_timing.sh" run "$GATTN" "$OUT/ruler-avx512" "$THREADS"
    "$HERE/ruler_timing.sh" compare "$OUT/ruler-avx512" "$OUT/ruler-amx"
}
step_long() {
    /usr/bin/time -v "$GATTN" bench -t "$THREADS" -m "$INT8_DIR" --kv int8 -p 131072 -n 1 -r 1 \
        --prefill-only --rope-scaling yarn:4
}

for step in $STEPS; do
    declare -F "step_$step" > /dev/null || { echo "prefill_targets: no step '$step'" >&2; exit 2; }
    if [ -e "$OUT/$step.done" ]; then
        echo "== $step: done before ($OUT/$step.log)"
        continue
    fi
    echo "== $step: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
    if "step_$step" > "$OUT/$step.log" 2>&1; then
        touch "$OUT/$step.done"
        echo "   done: $(date -u +%FT%TZ), log $OUT/$step.log"
    else
        echo "   FAILED: see $OUT/$step.log" >&2
        exit 1
    fi
done
