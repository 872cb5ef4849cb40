#!/usr/bin/env bash
# Runs staticcheck at the version gamp pins, installing it first (go install through
# the Go module proxy) when it is missing or another version. When it cannot be
# installed (offline), the check is skipped and logged in $GAMP_SKIP_LOG for make
# test's report, unless GAMP_REQUIRE_STATICCHECK=1 or GAMP_REQUIRE_ALL=1 make that a
# failure.
#
#   scripts/staticcheck.sh [staticcheck arguments]
set -euo pipefail
version=${STATICCHECK_VERSION:-v0.8.2} # staticcheck 2026.2.2, which knows Go 1.26
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
sc=$gobin/staticcheck
if ! "$sc" -version 2>/dev/null | grep -q "(${version#v})"; then
  echo "make check: installing staticcheck $version into $gobin" >&2
  if ! GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@$version" >&2; then
    msg="staticcheck $version could not be installed (go install honnef.co/go/tools/cmd/staticcheck@$version)"
    if [ "${GAMP_REQUIRE_STATICCHECK:-}" = 1 ] || [ "${GAMP_REQUIRE_ALL:-}" = 1 ]; then
      echo "make check: $msg" >&2
      exit 1
    fi
    echo "make check: $msg: skipping staticcheck" >&2
    if [ -n "${GAMP_SKIP_LOG:-}" ]; then
      printf '{"package":".","test":"staticcheck %s","need":"staticcheck %s","install":"go install honnef.co/go/tools/cmd/staticcheck@%s (needs the Go module proxy)","what":"skipped","reason":"go install failed"}\n' \
        "$*" "$version" "$version" >>"$GAMP_SKIP_LOG"
    fi
    exit 0
  fi
fi
exec "$sc" "$@"
