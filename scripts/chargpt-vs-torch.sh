#!/usr/bin/env bash
# gamp's chargpt against PyTorch (scripts/torch_chargpt.py) on the CPU, default model
# (4 blocks, width 128, 4 heads, context 128, batch 32) on the fortunes corpus.
#
#   scripts/chargpt-vs-torch.sh timing    # ms per training step, FP32 and BF16 (default)
#   scripts/chargpt-vs-torch.sh compare   # the same run in both: FP32 losses step for step, BF16 final val loss
#
# timing: ROUNDS rounds alternate the engines (and which goes first) so that other load
# on the machine hits both alike; each figure is the median of STEPS steps after
# WARMUP untimed ones (gamp: the median of its JSON's step_ms after the first WARMUP),
# the table the median over rounds; then a row of the same medians against the CPU's
# FP32 and BF16 ceilings (scripts/ceiling.sh; CEILING=0 skips it).
# compare: FP32 for CSTEPS steps with the validation loss at every step (2 batches), and
# BF16 for BSTEPS steps; both start from the weights gamp exports (PRECISIONS=fp32 runs
# one of them).
# PyTorch gets its best configuration: OpenBLAS (libopenblas0-openmp) for FP32,
# its bundled oneDNN for BF16, torch.set_num_threads(THREADS).
set -euo pipefail
mode=${1:-timing}
rounds=${ROUNDS:-3}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
threads=${THREADS:-2}
python=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."
scripts/ensure-fortunes.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/chargpt" ./examples/chargpt
"$python" -c 'import torch' || { echo "chargpt-vs-torch: no PyTorch for $python (apt-get install python3-torch)" >&2; exit 1; }
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
torchenv() { LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_NUM_THREADS=$threads "$@"; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16|avx512_fp16)$' | tr '\n' ' ')

case "$mode" in
timing)
  results="$tmp/results"
  : >"$results"
  run_gamp() {
    for p in fp32 bf16; do
      GAMP_CPU_THREADS=$threads "$tmp/chargpt" -device cpu -precision $p -steps $((steps + warmup)) -warmup 0 \
          -eval-every 0 -eval-batches 1 -sample 0 -quiet -json |
        "$python" -c 'import json, sys, statistics
d = json.load(sys.stdin)
print("gamp", d["precision"], statistics.median(d["step_ms"][int(sys.argv[1]):]))' "$warmup" >>"$results"
    done
  }
  run_torch() {
    torchenv "$python" scripts/torch_chargpt.py --bench --precision fp32,bf16 --steps "$steps" \
        --warmup-steps "$warmup" --threads "$threads" |
      "$python" -c 'import json, sys
d = json.load(sys.stdin)
for r in d["rows"]:
    print("torch", r["precision"], r["median_ms"])' >>"$results"
  }
  for r in $(seq "$rounds"); do
    echo "round $r/$rounds" >&2
    if [ $((r % 2)) = 1 ]; then run_gamp; run_torch; else run_torch; run_gamp; fi
  done
  echo
  echo "CPU: $cpu ($flags), $threads threads; PyTorch $("$python" -c 'import torch; print(torch.__version__)')"
  echo "chargpt default model, median ms per training step over $rounds rounds"
  "$python" - "$results" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    eng, prec, ms = line.split()
    v.setdefault((eng, prec), []).append(float(ms))
m = {k: statistics.median(x) for k, x in v.items()}
print("| torch fp32 | gamp fp32 | torch bf16 | gamp bf16 | gamp÷torch fp32 | gamp÷torch bf16 | gamp bf16÷fp32 |")
print("|---|---|---|---|---|---|---|")
g32, g16, t32, t16 = m[("gamp", "fp32")], m[("gamp", "bf16")], m[("torch", "fp32")], m[("torch", "bf16")]
print(f"| {t32:.1f} | {g32:.1f} | {t16:.1f} | {g16:.1f} | {g32/t32:.2f} | {g16/t16:.2f} | {g16/g32:.2f} |")
PY
  # The same medians against the CPU's ceilings (scripts/ceiling.sh) and a step's
  # product FLOPs (chargpt -flops: causally masked attention scores count as
  # computed, so the shares read high by the half of attention that gamp skips, about
  # 8 % of the FLOPs): each engine's step as a share of the ceiling, and the share a
  # target's step time needs (as in make bench-torch's second table, whole step only).
  # CEILING=0 skips it.
  if [ "${CEILING:-1}" = 1 ] && command -v gcc >/dev/null; then
    scripts/ceiling.sh "$threads" >"$tmp/ceiling"
    GAMP_CPU_THREADS=$threads "$tmp/chargpt" -device cpu -precision fp32 -steps 2 -warmup 0 -eval-every 0 \
        -eval-batches 1 -sample 0 -quiet -json -flops |
      "$python" -c 'import json, sys; print(json.load(sys.stdin)["products_gflop_per_step"])' >"$tmp/flops"
    echo
    "$python" - "$results" "$tmp/ceiling" "$tmp/flops" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    eng, prec, ms = line.split()
    v.setdefault((eng, prec), []).append(float(ms))
m = {k: statistics.median(x) for k, x in v.items()}
ceil = dict((f[0], float(f[1])) for f in (l.split() for l in open(sys.argv[2])))
g = float(open(sys.argv[3]).read())
if "fp32" not in ceil or "bf16" not in ceil:
    print("ceiling: no FP32 or BF16 figure (no AVX512_BF16?): skipped")
    sys.exit(0)
pct = lambda ms, p: f"{100 * g / (ms / 1e3) / ceil[p]:.0f} %"
g32, g16, t32, t16 = m[("gamp", "fp32")], m[("gamp", "bf16")], m[("torch", "fp32")], m[("torch", "bf16")]
print(f"Against the CPU's ceiling (FP32 FMA {ceil['fp32']:.0f} GFLOP/s, VDPBF16PS {ceil['bf16']:.0f}): {g:.2f} GFLOP of products a step")
print("| gamp fp32 | torch fp32 | fp32 ≤ 0.8×torch needs | gamp bf16 | torch bf16 | bf16 ≤ 0.8×torch needs | bf16 ≤ 0.55×gamp fp32 needs |")
print("|---|---|---|---|---|---|---|")
print(f"| {pct(g32, 'fp32')} | {pct(t32, 'fp32')} | {pct(0.8 * t32, 'fp32')} | {pct(g16, 'bf16')} | {pct(t16, 'bf16')} | "
      f"{pct(0.8 * t16, 'bf16')} | {pct(0.55 * g32, 'bf16')} |")
PY
  fi
  ;;
compare)
  csteps=${CSTEPS:-50}
  lr=${LR:-6e-3}
  bsteps=${BSTEPS:-300}
  for p in ${PRECISIONS:-fp32 bf16}; do
    # FP32: the first CSTEPS steps of the default schedule's warm-up (CWARMUP of 50),
    # validation at every step; BF16: a short run of its own, validation 6 times.
    n=$csteps; every=1; eb=2; wu=${CWARMUP:-45}
    if [ $p = bf16 ]; then n=$bsteps; every=$((bsteps / 6)); eb=10; wu=$((n / 10)); fi
    common=(-steps "$n" -eval-every "$every" -eval-batches "$eb" -warmup "$wu" -lr "$lr")
    echo "$p: gamp, $n steps" >&2
    GAMP_CPU_THREADS=$threads "$tmp/chargpt" -device cpu -precision $p "${common[@]}" -sample 0 -quiet -json \
      -export-init "$tmp/init.safetensors" >"$tmp/gamp-$p.json"
    echo "$p: PyTorch, $n steps" >&2
    torchenv "$python" scripts/torch_chargpt.py --init "$tmp/init.safetensors" --precision $p --threads "$threads" \
      --steps "$n" --eval-every "$every" --eval-batches "$eb" --warmup "$wu" --lr "$lr" >"$tmp/torch-$p.json"
  done
  echo
  echo "CPU: $cpu ($flags), $threads threads; PyTorch $("$python" -c 'import torch; print(torch.__version__)')"
  "$python" - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
import os
for p in ("fp32", "bf16"):
    if not os.path.exists(f"{d}/torch-{p}.json"):
        continue
    g, t = json.load(open(f"{d}/gamp-{p}.json")), json.load(open(f"{d}/torch-{p}.json"))
    rel = lambda a, b: abs(a["loss"] - b["loss"]) / abs(b["loss"])
    tr = max(rel(a, b) for a, b in zip(g["train_curve"], t["train_curve"]))
    va = max(rel(a, b) for a, b in zip(g["val_curve"], t["val_curve"]))
    gv, tv = g["val_curve"][-1], t["val_curve"][-1]
    print(f"{p}: {len(g['train_curve'])} steps; max relative difference train {tr:.2e}, validation {va:.2e}; "
          f"final validation loss gamp {gv['loss']:.4f}, PyTorch {tv['loss']:.4f} (difference {abs(gv['loss'] - tv['loss']):.4f} nats)")
PY
  ;;
*)
  echo "usage: scripts/chargpt-vs-torch.sh [timing|compare]" >&2
  exit 2
  ;;
esac
