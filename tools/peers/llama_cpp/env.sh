# Shared settings for the llama.cpp peer scripts (sourced, not run).
# Everything fetched or built lives outside the repository, under $PEERS_DIR.

# Pinned: the llama.cpp sources vendored in this PyPI sdist of llama-cpp-python
# (vendor/llama.cpp is llama.cpp commit 0c1e57098bba, 2026-10-01; gguf-py 0.19.0).
LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# Build and Python tools, from PyPI into a private venv (no root needed).
CMAKE_VERSION=3.31.10
NUMPY_VERSION=2.4.6

PEERS_DIR=${GATTN_PEERS_DIR:-$HOME/.cache/gattn-peers}
SDIST_DIR=$PEERS_DIR/sdist
SRC_DIR=$PEERS_DIR/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION
LLAMA_DIR=$SRC_DIR/vendor/llama.cpp
BUILD_DIR=$PEERS_DIR/build-llama-cpp-$LLAMA_CPP_PYTHON_VERSION
BIN_DIR=$BUILD_DIR/bin
VENV_DIR=$PEERS_DIR/venv-llama-cpp-$LLAMA_CPP_PYTHON_VERSION
PY=$VENV_DIR/bin/python

require_setup() {
    for tool in llama-bench llama-quantize; do
        if [ ! -x "$BIN_DIR/$tool" ]; then
            echo "error: $BIN_DIR/$tool not found; run tools/peers/llama_cpp/setup.sh first" >&2
            exit 1
        fi
    done
    if [ ! -x "$PY" ]; then
        echo "error: $PY not found; run tools/peers/llama_cpp/setup.sh first" >&2
        exit 1
    fi
}

# On AMX machines (Sapphire Rapids and later) llama.cpp repacks Q8_0 weights for its AMX
# kernels, and at this pinned commit that path crashes in ggml_backend_amx_mul_mat (a known,
# unfixed bug: ggml-org/llama.cpp#20824; seen here on the first prompt). `--repack 0` keeps
# its AVX-512 kernels, the configuration that runs. Override with LLAMA_BENCH_ARGS.
if [ -z "${LLAMA_BENCH_ARGS+set}" ]; then
    LLAMA_BENCH_ARGS=
    if grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
        LLAMA_BENCH_ARGS="--repack 0"
    fi
fi
