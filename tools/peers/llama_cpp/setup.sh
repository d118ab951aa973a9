#!/usr/bin/env bash
# Fetch the llama.cpp sources vendored in the pinned llama-cpp-python sdist (PyPI), build
# llama-bench, llama-quantize and llama-simple for this CPU, and make a venv with gguf-py.
# Idempotent: each step is skipped when its output is already there.
# Usage: tools/peers/llama_cpp/setup.sh        (cache: ${GATTN_PEERS_DIR:-$HOME/.cache/gattn-peers})
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

for tool in python3 cc c++ make tar sha256sum; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: '$tool' is missing. On Debian: apt-get update && apt-get install -y build-essential python3-venv" >&2
        exit 1
    fi
done
mkdir -p "$SDIST_DIR" "$PEERS_DIR/src"

# 1. Python venv with cmake (the PyPI wheel, so no root is needed), numpy, and later gguf-py.
if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV_DIR"
fi
"$PY" -m pip install --quiet --upgrade "cmake==$CMAKE_VERSION" "numpy==$NUMPY_VERSION"
CMAKE=$VENV_DIR/bin/cmake

# 2. The sdist. Only llama-cpp-python itself is taken as source: "--no-binary :all:" would
#    also build its build dependencies (cmake, ninja) from source.
SDIST=$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
    "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$SDIST_DIR"
fi
echo "$LLAMA_CPP_PYTHON_SHA256  $SDIST" | sha256sum --check --quiet
if [ ! -f "$LLAMA_DIR/CMakeLists.txt" ]; then
    tar -xzf "$SDIST" -C "$PEERS_DIR/src"
fi

# 3. gguf-py from the same source tree (its writer is what write_gguf.py uses).
"$PY" -m pip install --quiet "$LLAMA_DIR/gguf-py"

# 4. Build only what the benchmarks need: Release, native CPU flags, no GPU/BLAS/network.
start=$(date +%s)
"$CMAKE" -S "$LLAMA_DIR" -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_BLAS=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=ON \
    >"$BUILD_DIR.configure.log" 2>&1 || { tail -30 "$BUILD_DIR.configure.log"; exit 1; }
"$CMAKE" --build "$BUILD_DIR" --config Release -j "${JOBS:-$(nproc)}" \
    --target llama-bench llama-quantize llama-simple
echo "build: $(( $(date +%s) - start )) s (configure + compile, $(nproc) jobs)"
"$BIN_DIR/llama-bench" --help >/dev/null
echo "ok: $BIN_DIR/{llama-bench,llama-quantize,llama-simple}, venv $VENV_DIR"
