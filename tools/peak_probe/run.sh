#!/usr/bin/env bash
# Builds and runs peak.c (needs gcc with OpenMP and an AVX-512 BF16/VNNI CPU), and shows that the
# compiled loops really hold 10 independent instructions each.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
gcc -O2 -march=native -fopenmp "$here/peak.c" -o "$out/peak"
echo "instructions in the binary: $(objdump -d "$out/peak" | grep -c vfmadd) vfmadd, $(objdump -d "$out/peak" | grep -c vdpbf16ps) vdpbf16ps, $(objdump -d "$out/peak" | grep -c vpdpbusd) vpdpbusd"
"$out/peak"
