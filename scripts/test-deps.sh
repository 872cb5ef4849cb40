#!/usr/bin/env bash
# Installs what `make test`'s checks need, where it can: the Debian packages that are
# missing, as root with apt-get (as `make demo` installs its data). Without root or
# apt-get it says what to install; the tests that need a missing tool then skip, and
# make test lists them at the end of the run. The Go tools (staticcheck) are installed
# by scripts/staticcheck.sh when make check runs.
#
#   dataset-fashion-mnist  the real-data tests (data, overflow)
#   openmpi-bin            the multi-process DDP and gamprun tests
#   clang-16, g++          the CUDA kernels compiled to PTX and run on the CPU (shim)
#   gcc                    the stand-in CUDA libraries the bindings and the emulated
#                          device load
#   binutils               as and objdump, for the BF16 assembly generator
#   fortunes               the text examples/chargpt trains on (data tests too)
#   python3-torch          examples/chargpt's comparison with PyTorch
set -uo pipefail
pkgs=(make dataset-fashion-mnist openmpi-bin clang-16 g++ gcc binutils fortunes python3-torch)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "make test: installing ${missing[*]}" >&2
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
    exit 0
  fi
  echo "make test: apt-get could not install ${missing[*]}; the checks that need them will be skipped (listed at the end)" >&2
else
  echo "make test: not installed: ${missing[*]}. The checks that need them will be skipped (listed at the end);" >&2
  echo "  to run them: sudo apt-get install -y ${missing[*]}" >&2
fi
exit 0
