#!/usr/bin/env bash
# ceiling.sh prints this CPU's FP32 FMA and BF16 (VDPBF16PS) ceilings on THREADS
# threads (first argument, default 2), as scripts/kernel-ceiling.c measures them with
# nothing loaded in the loop: a line "fp32 GFLOP/s" and, where the CPU has
# AVX512_BF16, a line "bf16 GFLOP/s". make bench-torch and
# scripts/chargpt-vs-torch.sh set their step times against these. Needs gcc; prints
# nothing on a CPU without AVX-512.
set -euo pipefail
threads=${1:-2}
cd "$(dirname "$0")/.."
if ! grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  echo "ceiling.sh: no AVX-512 on this CPU: kernel-ceiling's loops need it" >&2
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -mavx512f -o "$tmp/kernel-ceiling" scripts/kernel-ceiling.c -lpthread
"$tmp/kernel-ceiling" "$threads" 256 peak,dpbf16 |
  awk '$1 == "peak" { print "fp32", $2 } $1 == "dpbf16" && $2 ~ /^[0-9.]+$/ { print "bf16", $2 }'
