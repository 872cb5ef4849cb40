#!/usr/bin/env bash
# Makes sure the Fashion-MNIST files are present for `make demo`. For Debian's
# directory it installs dataset-fashion-mnist when running as root, otherwise it says
# exactly what to run. For any other directory (make demo DATA=/elsewhere) installing
# the package cannot help — it fills Debian's directory — so it says which files that
# directory lacks.
set -euo pipefail
default=/usr/share/datasets/fashion-mnist
dir="${1:-$default}"
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)
missing() {
  local f out=()
  for f in "${files[@]}"; do
    [ -f "$dir/$f.gz" ] || [ -f "$dir/$f" ] || out+=("$f(.gz)")
  done
  [ ${#out[@]} -gt 0 ] && printf '%s, ' "${out[@]}" | sed 's/, $//'
  return 0
}
[ -z "$(missing)" ] && exit 0

if [ "$(realpath -m "$dir")" != "$default" ]; then
  where="$dir"
  [ -d "$dir" ] || where="$dir (no such directory)"
  echo "Fashion-MNIST is not in $where: missing $(missing)." >&2
  echo "Put the four IDX files there (gzipped or not), or leave DATA unset to use Debian's $default." >&2
  exit 1
fi

installed=no
dpkg-query -W -f='${Status}' dataset-fashion-mnist 2>/dev/null | grep -q 'install ok installed' && installed=yes
if [ "$installed" = no ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "Fashion-MNIST not found in $dir: installing Debian's dataset-fashion-mnist" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null
  [ -z "$(missing)" ] && exit 0
  installed=yes
fi
if [ "$installed" = yes ]; then
  echo "dataset-fashion-mnist is installed but $dir lacks $(missing);" >&2
  echo "reinstall it (sudo apt-get install --reinstall dataset-fashion-mnist) or run make demo DATA=/a/directory/with/the/files" >&2
  exit 1
fi
cat >&2 <<MSG
Fashion-MNIST is missing from $dir ($(missing)).
Install it with:   sudo apt-get install dataset-fashion-mnist
or put the four IDX files (gzipped or not) in a directory and run
  make demo DATA=/that/directory
MSG
exit 1
