#!/usr/bin/env bash
# gamp's float32 GEMM against PyTorch's (OpenBLAS) on the linear layers' shapes of
# cmd/ampbench's transformer-large and MLP: forward Y = X·Wᵀ, input gradient dX = dY·W
# and weight gradient dW = dYᵀ·X, GFLOP/s counting 2·rows·in·out. Rounds alternate the
# two engines (and which goes first); each round's figure per product is the median of
# its calls (scripts/torch_gemm_rates.py: 15 calls; BenchmarkGemmLinear: BENCHTIME
# calls), the table shows the median over the rounds and gamp ÷ torch (above 1: gamp
# faster).
#
#   scripts/gemm-vs-torch.sh            # 5 rounds, 2 threads
#   ROUNDS=7 THREADS=1 scripts/gemm-vs-torch.sh
#
# PyTorch gets its best FP32 configuration here, as in scripts/bench-torch.sh: OpenBLAS
# (libopenblas0-openmp) on LD_LIBRARY_PATH, torch.set_num_threads(THREADS).
set -euo pipefail
rounds=${ROUNDS:-5}
threads=${THREADS:-2}
benchtime=${BENCHTIME:-30x}
python=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "gemm-vs-torch: no PyTorch for $python (apt-get install python3-torch)" >&2
  exit 1
fi
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ ! -e "$openblas/libblas.so.3" ]; then
  echo "gemm-vs-torch: $openblas missing (apt-get install libopenblas0-openmp): PyTorch would run on the reference BLAS" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/cpu.test" ./backend/cpu/

# Both sides print "<rows>x<in>x<out>/<fwd|dx|dw> <GFLOP/s>" lines into $tmp/<side>.<round>.
torch_round() {
  LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_NUM_THREADS=$threads \
    THREADS=$threads "$python" scripts/torch_gemm_rates.py |
    awk '{sub(":", "", $1); print $1, $(NF-1)}' >"$tmp/torch.$1"
}
gamp_round() {
  (cd backend/cpu && GAMP_CPU_THREADS=$threads "$tmp/cpu.test" -test.run '^$' \
    -test.bench 'BenchmarkGemmLinear$/(2048x512x2048|2048x2048x512|2048x512x1536|256x784x1024|256x1024x1024)/.*/f32$' \
    -test.benchtime "$benchtime") |
    awk '/GFLOP\/s/ {n = $1; sub("^BenchmarkGemmLinear/", "", n); sub("/f32(-[0-9]+)?$", "", n); print n, $(NF-1)}' >"$tmp/gamp.$1"
}
for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  if [ $((r % 2)) = 1 ]; then torch_round "$r"; gamp_round "$r"; else gamp_round "$r"; torch_round "$r"; fi
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
tv=$("$python" -c 'import torch; print(torch.__version__)')
echo
echo "CPU: $cpu, $threads threads; PyTorch $tv with OpenBLAS; $rounds alternated rounds, medians"
echo
"$python" - "$tmp" "$rounds" <<'EOF'
import statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
rates = {"torch": {}, "gamp": {}}
for side in rates:
    for r in range(1, rounds + 1):
        for line in open(f"{tmp}/{side}.{r}"):
            name, v = line.split()
            rates[side].setdefault(name, []).append(float(v))
print("| product | torch GFLOP/s | gamp GFLOP/s | gamp ÷ torch |")
print("|---|---|---|---|")
ratios = []
for name in rates["torch"]:
    if name not in rates["gamp"]:
        continue
    t, g = statistics.median(rates["torch"][name]), statistics.median(rates["gamp"][name])
    ratios.append(g / t)
    print(f"| {name} | {t:.1f} | {g:.1f} | {g / t:.2f} |")
if ratios:
    print(f"\ngeometric mean gamp ÷ torch over {len(ratios)} products: {statistics.geometric_mean(ratios):.3f}")
EOF
