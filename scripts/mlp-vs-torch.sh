#!/usr/bin/env bash
# Times one training step of the 784-1024-1024-10 MLP (batch 256, cross-entropy, SGD
# with momentum) in gamp (BenchmarkMLPStep in backend/cpu: amp.Trainer at O0 and BF16
# O1) and in PyTorch (scripts/torch_mlp.py: FP32 and BF16 autocast), FP32 and BF16, and
# prints the medians side by side. Rounds alternate gamp and PyTorch so that other load
# on the machine hits both alike; each round's figure is the median of STEPS steps, and
# the table shows the median over the rounds with their range.
#
#   scripts/mlp-vs-torch.sh                  # 5 rounds of 30 steps, 2 threads
#   ROUNDS=9 STEPS=50 THREADS=1 scripts/mlp-vs-torch.sh
#
# PyTorch runs with /usr/bin/python3 (Debian's python3-torch) on OpenBLAS when
# libopenblas0-openmp is installed; without it FP32 falls back to the reference BLAS.
set -euo pipefail
rounds=${ROUNDS:-5}
steps=${STEPS:-30}
threads=${THREADS:-2}
python=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/cpu.test" ./backend/cpu/

torch=1
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "mlp-vs-torch: no PyTorch for $python; timing gamp only" >&2
  torch=0
fi
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ "$torch" = 1 ] && [ ! -e "$openblas/libblas.so.3" ]; then
  echo "mlp-vs-torch: $openblas missing (apt-get install libopenblas0-openmp): PyTorch FP32 runs on the reference BLAS" >&2
fi

results="$tmp/results"
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  (cd backend/cpu && GAMP_CPU_THREADS=$threads "$tmp/cpu.test" -test.run '^$' \
      -test.bench 'MLPStep' -test.benchtime "${steps}x") |
    awk '/^BenchmarkMLPStep\// { split($1, a, "[/-]"); print "gamp", a[2], $5 }' >>"$results"
  if [ "$torch" = 1 ]; then
    LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OPENBLAS_CORETYPE=SKYLAKEX \
      DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 "$python" scripts/torch_mlp.py \
      --threads "$threads" --steps "$steps" --repeats 1 |
      "$python" -c 'import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print("torch", r["precision"], r["median_ms"])' >>"$results"
  fi
done

echo
echo "MLP 784-1024-1024-10, batch 256, SGD momentum, cross-entropy; $threads threads;"
echo "median ms per step over $rounds rounds (each the median of $steps steps) [min-max of rounds]"
echo
sort -k1,1 -k2,2 -k3,3g "$results" | awk '
  { k = $1 " " $2; v[k, ++n[k]] = $3 }
  END {
    printf "%-6s %22s %22s %10s\n", "", "fp32", "bf16", "fp32/bf16"
    split("gamp torch", impls, " ")
    for (i = 1; i <= 2; i++) {
      im = impls[i]; line = sprintf("%-6s", im); ok = 0
      for (j = 1; j <= 2; j++) {
        p = (j == 1) ? "fp32" : "bf16"; k = im " " p; c = n[k]
        if (c == 0) { line = line sprintf(" %22s", "-"); med[p] = 0; continue }
        m = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
        med[p] = m; ok++
        line = line sprintf(" %8.2f [%5.2f-%5.2f]", m, v[k, 1], v[k, c])
      }
      if (ok == 2) line = line sprintf(" %9.2fx", med["fp32"] / med["bf16"])
      if (ok > 0) print line
    }
  }'
