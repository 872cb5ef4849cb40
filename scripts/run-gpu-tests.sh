#!/usr/bin/env bash
# Runs gamp's GPU checks on a machine with an NVIDIA GPU and no Go toolchain: the test
# binaries and programs that `make gpu-tests` built into .gpu/, with GAMP_REQUIRE_GPU=1
# so that a missing or broken driver fails instead of skipping. Logs go to $OUT (or
# .gpu/logs); the exit status is non-zero when anything failed.
#
#   make gpu-tests                 # on the development machine
#   .gpu/run.sh [quick]            # on the GPU machine, from the repository root
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/.gpu/logs}
mkdir -p "$out"
# make gpu-tests gzips the binaries (the whole folder then travels in under 64 MiB).
for z in .gpu/*.gz; do
  [ -e "$z" ] || continue
  case $z in *-ubyte.gz) continue ;; esac
  gunzip -f "$z" && chmod +x "${z%.gz}"
done
export GAMP_REQUIRE_GPU=1
export GAMP_KERNEL_CACHE=${GAMP_KERNEL_CACHE:-$root/.gpu/kernel-cache}
# NCCL for dist's GPU tests: PyTorch's pip packages carry libnccl.so.2 (nvidia/nccl/lib).
if [ -z "${GAMP_NCCL_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 '; then
  for py in python3 /opt/*/.venv/bin/python3; do
    d=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) || continue
    [ -f "$d/libnccl.so.2" ] && { export GAMP_NCCL_LIB=$d/libnccl.so.2; break; }
  done
fi
echo "NCCL: ${GAMP_NCCL_LIB:-libnccl.so.2 from the dynamic loader}"
fail=0
nvidia-smi -L 2>&1 | tee "$out/nvidia-smi.txt" || true
for t in .gpu/*.test; do
  name=$(basename "$t" .test)
  pkg=${name//__/\/}
  echo "== $pkg"
  # Test binaries run in their package directory, as go test runs them (testdata).
  if (cd "$root/$pkg" && "$root/$t" -test.count=1 -test.v -test.timeout=540s) >"$out/$name.log" 2>&1; then
    grep -E '^(ok|PASS)' "$out/$name.log" | tail -1
  else
    fail=1
    echo "FAILED: $pkg (log: $out/$name.log)"
    grep -E -- '--- FAIL|panic:|FAIL' "$out/$name.log" | head -20
  fi
  grep -E -- '--- SKIP' "$out/$name.log" | head -5
done
if [ "${1:-}" != quick ]; then
  data=$root/.gpu/data
  echo "== examples/fashion -device cuda:0 -precision fp16"
  if ! .gpu/fashion -device cuda:0 -precision fp16 -epochs "${EPOCHS:-2}" -data "$data" -quiet -json >"$out/fashion-fp16.log" 2>&1; then
    fail=1; echo "FAILED: fashion fp16"; tail -5 "$out/fashion-fp16.log"
  else tail -3 "$out/fashion-fp16.log"; fi
  for m in ${MODELS:-cnn transformer transformer-base}; do
    echo "== ampbench -device cuda:0 -model $m"
    if ! .gpu/ampbench -device cuda:0 -model "$m" -precision fp32,fp16 -opt-level O1,O2 -steps 50 -warmup 10 >"$out/ampbench-$m.log" 2>&1; then
      fail=1; echo "FAILED: ampbench $m"; tail -5 "$out/ampbench-$m.log"
    else cat "$out/ampbench-$m.log"; fi
  done
  if command -v python3 >/dev/null && [ -f scripts/torch_ampbench.py ]; then
    for m in ${MODELS:-cnn transformer transformer-base}; do
      echo "== PyTorch AMP on the same GPU: $m"
      python3 scripts/torch_ampbench.py --device cuda --model "$m" --steps 50 --warmup 10 2>&1 | tee "$out/torch-$m.log" || fail=1
    done
  fi
fi
exit $fail
