#!/usr/bin/env bash
# Builds every fuzz target and runs each for a few seconds from the committed seed corpus (for CI).
# Usage: fuzz/smoke.sh [SECONDS_PER_TARGET]   (default 5). Installs cargo-fuzz if it is missing.
# The corpus is copied to a scratch dir so that CI never grows the committed one.
set -euo pipefail
seconds="${1:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
export RUSTC_BOOTSTRAP=1   # libfuzzer-sys and -Zsanitizer need nightly features on stable Rust
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
targets=$(cargo fuzz list)
cargo fuzz build
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
for target in $targets; do
    mkdir -p "$scratch/$target"
    if [ -d "corpus/$target" ]; then cp -r "corpus/$target/." "$scratch/$target/"; fi
    echo "== $target (${seconds}s)"
    status=0
    max_len=8192
    # The int8 seed is a whole quantized tiny checkpoint (~220 KB): do not cut it.
    if [ "$target" = int8_checkpoint ]; then max_len=262144; fi
    # One input takes milliseconds; -timeout turns a hang into a failure within 5 minutes (not
    # libFuzzer's default 20) while tolerating the process being paused by a busy machine.
    cargo fuzz run "$target" "$scratch/$target" -- \
        -max_total_time="$seconds" -max_len="$max_len" -timeout=300 >"$scratch/$target.log" 2>&1 || status=$?
    grep -E '^Done|DONE|panicked|SUMMARY|crash-|timeout-|oom-' "$scratch/$target.log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$scratch/$target.log" >&2
        echo "fuzz target $target failed (exit $status): crash input in fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
echo "fuzz smoke: all targets ran ${seconds}s without a crash"
