#!/usr/bin/env bash
# Makes sure Debian's fortunes corpus is present for `make chargpt`: installs the
# fortunes package when running as root, otherwise says exactly what to run.
set -euo pipefail
dir="${1:-/usr/share/games/fortunes}"
have() { ls "$dir"/fortunes "$dir"/literature >/dev/null 2>&1; }
if have; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "The fortunes corpus is not in $dir: installing Debian's fortunes package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fortunes >/dev/null
  have && exit 0
fi
cat >&2 <<MSG
The fortunes corpus is missing: no fortunes or literature file in $dir.
Install it with:   sudo apt-get install fortunes
or train on any UTF-8 text file:
  go run ./examples/chargpt -text FILE
MSG
exit 1
