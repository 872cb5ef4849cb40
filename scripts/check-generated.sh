#!/usr/bin/env bash
# Re-runs every code generator — each `//go:generate go run PKG -o FILE` directive in
# the module — into a scratch directory of its own and fails when any file it writes
# there (FILE, and whatever it writes beside FILE) differs from that file in the tree: what `go generate ./... && git diff --exit-code` checks on a clean
# checkout, without rewriting files (in a working tree with uncommitted edits, that
# would overwrite them, and a fresh but uncommitted file would fail git diff).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
while IFS= read -r hit; do
  file=${hit%%:*}
  directive=${hit#*//go:generate }
  dir=$(dirname "$file")
  read -r -a words <<<"$directive"
  if [ ${#words[@]} -ne 5 ] || [ "${words[0]} ${words[1]} ${words[3]}" != "go run -o" ]; then
    echo "check-generated: $file: cannot re-run \"//go:generate $directive\": teach scripts/check-generated.sh its form (go run PKG -o FILE)" >&2
    fail=1
    continue
  fi
  pkg=${words[2]} out=${words[4]}
  n=$((n + 1))
  # The BF16 GEMM generator assembles with GNU as and reads the encoding back with
  # objdump; without them the check is skipped (and listed), not failed.
  if [ "${pkg##*/}" = asmgen ] && ! { command -v as && command -v objdump; } >/dev/null; then
    echo "check-generated: skipping $dir/$out: $pkg needs GNU as and objdump (apt-get install binutils)" >&2
    if [ -n "${GAMP_SKIP_LOG:-}" ]; then
      printf '{"package":"./%s","test":"go generate (%s)","need":"GNU as and objdump (the BF16 assembly generator)","install":"apt-get install -y binutils","what":"skipped","reason":"as or objdump not on PATH"}\n' \
        "$dir" "$out" >>"$GAMP_SKIP_LOG"
    fi
    continue
  fi
  gdir=$tmp/$n
  mkdir -p "$gdir/$(dirname "$out")"
  if ! (cd "$dir" && go run "$pkg" -o "$gdir/$out"); then
    echo "check-generated: $dir: go run $pkg failed" >&2
    fail=1
    continue
  fi
  while IFS= read -r got; do
    rel=${got#"$gdir"/}
    if ! cmp -s "$got" "$dir/$rel"; then
      echo "check-generated: $dir/$rel is not what $pkg writes: run go generate ./$dir/ and commit the result" >&2
      diff -u "$dir/$rel" "$got" 2>&1 | head -40 >&2 || true
      fail=1
    else
      echo "check-generated: $dir/$rel is up to date"
    fi
  done < <(find "$gdir" -type f | sort)
done < <(grep -rn --include='*.go' --exclude-dir=.git --exclude-dir=.gpu '^//go:generate ' . | sed 's/^\.\///' | sed 's/:[0-9]*:/:/')
if [ "$n" -eq 0 ] && [ "$fail" -eq 0 ]; then
  echo "check-generated: no go:generate directive found" >&2
  exit 1
fi
exit $fail
