#!/usr/bin/env bash
# Makes sure the Fashion-MNIST files are present for `make demo`: installs Debian's
# dataset-fashion-mnist when running as root, otherwise says exactly what to run.
set -euo pipefail
dir="${1:-/usr/share/datasets/fashion-mnist}"
have() { ls "$dir"/train-images-idx3-ubyte* "$dir"/t10k-labels-idx1-ubyte* >/dev/null 2>&1; }
if have; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Fashion-MNIST not found in $dir: installing Debian's dataset-fashion-mnist" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null
  have && exit 0
fi
cat >&2 <<MSG
Fashion-MNIST is missing: no train-images-idx3-ubyte(.gz) in $dir.
Install it with:   sudo apt-get install dataset-fashion-mnist
or put the four IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) in a directory and run
  make demo DATA=/that/directory
MSG
exit 1
