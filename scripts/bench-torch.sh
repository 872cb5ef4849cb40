#!/usr/bin/env bash
# gamp against PyTorch on the CPU: one training step of each ampbench model (the same
# networks, batches, SGD with momentum and cross-entropy as scripts/torch_ampbench.py),
# FP32 and BF16 autocast, in gamp (cmd/ampbench) and in PyTorch. Rounds alternate the
# two engines (and which goes first) so that other load on the machine hits both
# alike; each round's figure is the median of its steps, and the table shows the
# median over the rounds; a line under it gives, per model and precision, the lowest
# and highest gamp÷torch ratio of a single round (the band a single run can land in).
# The README's CPU figures come from this script. A second table then sets every
# figure and every target of issue 11 against the CPU's measured FP32 and BF16
# ceilings (see the end of this script; CEILING=0 skips it).
#
#   scripts/bench-torch.sh                              # all models
#   MODELS="cnn transformer" ROUNDS=7 STEPS=20 scripts/bench-torch.sh
#
# Rounds and steps per round default per model so that each timed block lasts a few
# hundred milliseconds or more: 5 rounds of 60 steps for the MLP (~3-11 ms a step), 5 of
# 40 for the CNN and the transformer, 3 of 15 for transformer-large (~0.2-0.7 s a
# step). Blocks of
# 15 MLP steps (50-150 ms) let a passing change in the machine's speed set a whole
# block's median: the MLP's FP32 ratio read 0.76-0.85 over seven runs within one hour,
# and 0.77-0.82 over four runs of 5 rounds of 60. ROUNDS and STEPS, when set, apply to
# every model.
#
# PyTorch gets its best configuration here: Debian's python3-torch with OpenBLAS
# (libopenblas0-openmp on LD_LIBRARY_PATH) for FP32 linear layers, its bundled oneDNN
# for convolutions and BF16, torch.set_num_threads(THREADS). Without OpenBLAS it says
# so (FP32 then runs on the reference BLAS and the comparison is unfair to PyTorch).
set -euo pipefail
# rounds_for and steps_for give a model's defaults (see above) unless ROUNDS or STEPS
# is set.
rounds_for() {
  if [ -n "${ROUNDS:-}" ]; then echo "$ROUNDS"; return; fi
  case $1 in transformer-large) echo 3 ;; *) echo 5 ;; esac
}
steps_for() {
  if [ -n "${STEPS:-}" ]; then echo "$STEPS"; return; fi
  case $1 in mlp) echo 60 ;; cnn | transformer) echo 40 ;; *) echo 15 ;; esac
}
warmup=${WARMUP:-5}
threads=${THREADS:-2}
models=${MODELS:-mlp cnn transformer transformer-large}
python=${PYTHON:-/usr/bin/python3}
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ampbench" ./cmd/ampbench

torch=1
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "bench-torch: no PyTorch for $python (apt-get install python3-torch); timing gamp only" >&2
  torch=0
fi
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ "$torch" = 1 ] && [ ! -e "$openblas/libblas.so.3" ]; then
  echo "bench-torch: $openblas missing (apt-get install libopenblas0-openmp): PyTorch FP32 runs on the reference BLAS" >&2
fi

results="$tmp/results"
: >"$results"
# Each precision runs as its own block of steps, as scripts/torch_ampbench.py runs
# them (all FP32 steps, then all BF16 steps), not interleaved step by step as
# ampbench's own multi-precision table does: interleaving evicts one
# configuration's weights and activations from the caches before each step of the
# other, which slowed gamp's steps by 5-20 % against PyTorch's blocked ones.
run_gamp() { # model steps round
  local p
  for p in fp32 bf16; do
    GAMP_CPU_THREADS=$threads "$tmp/ampbench" -device cpu -model "$1" -precision "$p" \
        -steps "$2" -warmup "$warmup" -json |
      "$python" -c 'import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    print("gamp", d["model"], r["precision"], r["median_ms"], sys.argv[1])' "$3" >>"$results"
  done
}
run_torch() { # model steps round
  [ "$torch" = 1 ] || return 0
  LD_LIBRARY_PATH="$openblas${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_NUM_THREADS=$threads \
      "$python" scripts/torch_ampbench.py --device cpu --model "$1" --threads "$threads" \
      --steps "$2" --warmup "$warmup" --json |
    "$python" -c 'import json, sys
d = json.load(sys.stdin)
for r in d["rows"]:
    print("torch", d["model"], r["precision"], r["median_ms"], sys.argv[1])' "$3" >>"$results"
}

plan=""
for m in $models; do
  rounds=$(rounds_for "$m")
  steps=$(steps_for "$m")
  plan="$plan${plan:+, }$m $rounds×$steps"
  for r in $(seq "$rounds"); do
    echo "$m: round $r/$rounds" >&2
    if [ $((r % 2)) = 1 ]; then run_gamp "$m" "$steps" "$r"; run_torch "$m" "$steps" "$r"; else run_torch "$m" "$steps" "$r"; run_gamp "$m" "$steps" "$r"; fi
  done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512f|avx512_bf16|amx_bf16|avx512_fp16)$' | tr '\n' ' ')
tv=$([ "$torch" = 1 ] && "$python" -c 'import torch; print(torch.__version__)' || echo none)
echo
echo "CPU: $cpu ($flags), $threads threads; PyTorch $tv"
echo "median ms per training step over the rounds, each round the median of its steps (rounds×steps: $plan)"
echo
"$python" - "$results" <<'EOF'
import statistics, sys
v, byround = {}, {}
for line in open(sys.argv[1]):
    eng, model, prec, ms, rnd = line.split()
    v.setdefault((eng, model, prec), []).append(float(ms))
    byround[(eng, model, prec, rnd)] = float(ms)
med = {k: statistics.median(x) for k, x in v.items()}
models = list(dict.fromkeys(k[1] for k in v))
def f(k):
    return f"{med[k]:8.2f}" if k in med else f"{'-':>8}"
def ratio(a, b):
    return f"{med[a] / med[b]:7.2f}" if a in med and b in med else f"{'-':>7}"
print(f"| {'model':17} | torch fp32 | gamp fp32 | torch bf16 | gamp bf16 | gamp÷torch fp32 | gamp÷torch bf16 | gamp bf16÷fp32 |")
print("|---|---|---|---|---|---|---|---|")
for m in models:
    g32, g16, t32, t16 = ("gamp", m, "fp32"), ("gamp", m, "bf16"), ("torch", m, "fp32"), ("torch", m, "bf16")
    print(f"| {m:17} | {f(t32)} | {f(g32)} | {f(t16)} | {f(g16)} | {ratio(g32, t32):>15} | {ratio(g16, t16):>15} | {ratio(g16, g32):>14} |")
# The spread: gamp÷torch within each round (the two engines ran back to back), lowest
# to highest over the rounds. A ratio whose band straddles a target is not settled by
# one run.
rounds = sorted({k[3] for k in byround}, key=int)
band = []
for m in models:
    for p in ("fp32", "bf16"):
        rs = [byround[("gamp", m, p, r)] / byround[("torch", m, p, r)] for r in rounds
              if ("gamp", m, p, r) in byround and ("torch", m, p, r) in byround]
        if rs:
            band.append(f"{m} {p} {min(rs):.2f}-{max(rs):.2f}")
if band:
    print()
    print("gamp÷torch within each round, lowest-highest: " + ", ".join(band))
EOF

# What the targets ask of the CPU. scripts/kernel-ceiling.c measures the ceiling of
# the FP32 FMA loop (`peak`) and of VDPBF16PS (`dpbf16`) on $threads threads; one
# profiled ampbench run per model and precision (-ops -json) counts the FLOPs of a
# step's products (linear, conv2d, attention: profiler.Record.FLOPs) and their time.
# The table sets each target's step time against them: "needs" is the rate over the
# whole step that the target's time asks for, as a share of the ceiling (above 100 %
# the target is out of reach even if nothing but the products took any time);
# "products" the rate the products alone would need with the rest of the step left
# at the time it takes. The profiled run is a process of its own, which the VM can run
# slower or faster than the rounds above (and the profiler's bookkeeping is in its
# steps), so it gives only the split: the products' share of its step (medians over its
# steps of the products' time and of the rest), applied to gamp's median step of the
# rounds — the products' own time and the rest of the step both at the rounds' speed.
# CEILING=0 skips this part.
[ "${CEILING:-1}" = 1 ] || exit 0
if ! command -v gcc >/dev/null; then
  echo; echo "bench-torch: no gcc: the ceiling table is skipped (apt-get install gcc)"; exit 0
fi
scripts/ceiling.sh "$threads" >"$tmp/ceiling"
: >"$tmp/flops"
for m in $models; do
  case $m in transformer-large) s=5 ;; mlp) s=60 ;; *) s=30 ;; esac
  for p in fp32 bf16; do
    GAMP_CPU_THREADS=$threads "$tmp/ampbench" -device cpu -model "$m" -precision "$p" \
        -steps "$s" -warmup 2 -ops 1 -json |
      "$python" -c 'import json, sys
d = json.load(sys.stdin)
for r in d["results"]:
    print(d["model"], r["precision"], r["products_gflop_per_step"], r["products_ms_per_step"], r["other_ms_per_step"])' >>"$tmp/flops"
  done
done
echo
"$python" - "$results" "$tmp/ceiling" "$tmp/flops" "$threads" <<'EOF'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    eng, model, prec, ms, rnd = line.split()
    v.setdefault((eng, model, prec), []).append(float(ms))
med = {k: statistics.median(x) for k, x in v.items()}
ceil = {}
for line in open(sys.argv[2]):  # scripts/ceiling.sh: "fp32 X", "bf16 Y"
    f = line.split()
    ceil[f[0]] = float(f[1])
flops = {}
for line in open(sys.argv[3]):
    m, p, g, prod_ms, other_ms = line.split()
    flops[(m, p)] = (float(g), float(prod_ms), float(other_ms))
if "fp32" not in ceil or "bf16" not in ceil:
    print("ceiling: kernel-ceiling gave no FP32 or BF16 figure (no AVX512_BF16?): table skipped")
    sys.exit(0)
print(f"Against the CPU's ceiling (scripts/kernel-ceiling.c, {sys.argv[4]} threads): FP32 FMA {ceil['fp32']:.0f} GFLOP/s, "
      f"VDPBF16PS {ceil['bf16']:.0f}. GFLOP: a step's products (the same in both precisions). "
      "Each cell: share of the ceiling over the whole step; for gamp, whole step / its products in their own time; "
      "for a target, what its step time needs, whole step / products alone (the rest of the step at gamp's time). "
      "The products' share of gamp's step comes from a profiled run of its own, applied to the step of the rounds.")
print()
print("| model | GFLOP | gamp fp32 | torch fp32 | fp32 ≤ 0.8×torch needs | gamp bf16 | torch bf16 | bf16 ≤ 0.8×torch needs | bf16 ≤ 0.55×gamp fp32 needs |")
print("|---|---|---|---|---|---|---|---|---|")
def pct(g, ms, p):
    return f"{100 * g / (ms / 1e3) / ceil[p]:.0f} %" if ms and ms > 0 else "-"
def split(m, p):
    # gamp's median step of the rounds cut in the profiled run's proportions: the
    # products' time and the rest's.
    g, prod, rest = flops[(m, p)]
    step = med.get(("gamp", m, p))
    if step is None or prod + rest <= 0:
        return prod, rest
    return step * prod / (prod + rest), step * rest / (prod + rest)
def needs(m, p, target):
    if target is None or (m, p) not in flops:
        return "-"
    g = flops[(m, p)][0]
    rest = split(m, p)[1]
    whole = pct(g, target, p)
    alone = pct(g, target - rest, p) if target > rest else "∞"
    return f"{whole} / {alone}"
models = list(dict.fromkeys(k[1] for k in v))
for m in models:
    if (m, "fp32") not in flops:
        continue
    g = flops[(m, "fp32")][0]
    g32 = med.get(("gamp", m, "fp32"))
    t32, t16 = med.get(("torch", m, "fp32")), med.get(("torch", m, "bf16"))
    def own(p):  # gamp's whole step, and its products in their own time
        return f"{pct(g, med.get(('gamp', m, p)), p)} / {pct(g, split(m, p)[0], p)}" if (m, p) in flops else "-"
    cells = [m, f"{g:.3f}", own("fp32"), pct(g, t32, "fp32"), needs(m, "fp32", t32 and 0.8 * t32),
             own("bf16"), pct(g, t16, "bf16"), needs(m, "bf16", t16 and 0.8 * t16),
             needs(m, "bf16", g32 and 0.55 * g32)]
    print("| " + " | ".join(cells) + " |")
EOF
