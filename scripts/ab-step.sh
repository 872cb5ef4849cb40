#!/bin/sh
# ab-step.sh BASE [NEW]: one ampbench training step built at two commits, timed in
# alternated pairs, for a speed change too small for one run to show on a noisy
# machine. Each pair runs both builds back to back (base first in odd pairs, new first
# in even ones, so a drift in the machine's speed hits both alike); each run's figure
# is ampbench's median ms a step; the script prints every pair's new÷base and their
# median, lowest and highest. NEW defaults to HEAD; BASE against NEW itself is an A/A
# run: the noise floor of the method on this machine.
#
#   scripts/ab-step.sh HEAD~1                     # transformer, bf16, 8 pairs
#   MODEL=cnn PRECISION=fp32 PAIRS=12 STEPS=200 scripts/ab-step.sh main my-branch
#
# MODEL (ampbench -model, default transformer), PRECISION (one of fp32, fp16, bf16;
# default bf16), PAIRS (default 8), STEPS (timed steps a run, default 100) and WARMUP
# (default 5) set the runs; THREADS sets GAMP_CPU_THREADS (default: every CPU).
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/ab-step.sh BASE [NEW]" >&2; exit 2; }
BASE=$1
NEW=${2:-HEAD}
MODEL=${MODEL:-transformer}
PRECISION=${PRECISION:-bf16}
PAIRS=${PAIRS:-8}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-5}
GO=${GO:-go}
case $PRECISION in fp32 | fp16 | bf16) ;; *) echo "ab-step: PRECISION must be one of fp32, fp16, bf16, got $PRECISION" >&2; exit 2 ;; esac
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'for w in "$tmp"/wt-*; do [ -d "$w" ] && git -C "$root" worktree remove --force "$w"; done; rm -rf "$tmp"' EXIT
for side in base new; do
	rev=$BASE
	[ "$side" = new ] && rev=$NEW
	git -C "$root" rev-parse --verify --quiet "$rev^{commit}" >/dev/null || { echo "ab-step: no commit $rev" >&2; exit 2; }
	git -C "$root" worktree add --detach "$tmp/wt-$side" "$rev" >/dev/null 2>&1
	(cd "$tmp/wt-$side" && "$GO" build -o "$tmp/ampbench-$side" ./cmd/ampbench)
	echo "$side: $(git -C "$root" rev-parse --short "$rev")"
done
run() { # side: prints the run's median ms a step
	if [ -n "${THREADS:-}" ]; then
		GAMP_CPU_THREADS=$THREADS "$tmp/ampbench-$1" -device cpu -model "$MODEL" -precision "$PRECISION" -steps "$STEPS" -warmup "$WARMUP" -json
	else
		"$tmp/ampbench-$1" -device cpu -model "$MODEL" -precision "$PRECISION" -steps "$STEPS" -warmup "$WARMUP" -json
	fi | tr -d ' \n' | sed -n 's/.*"median_ms":\([0-9.e+-]*\).*/\1/p'
}
p=1
while [ "$p" -le "$PAIRS" ]; do
	if [ $((p % 2)) = 1 ]; then
		b=$(run base)
		n=$(run new)
	else
		n=$(run new)
		b=$(run base)
	fi
	[ -n "$b" ] && [ -n "$n" ] || { echo "ab-step: ampbench printed no median_ms" >&2; exit 1; }
	echo "$b $n" >>"$tmp/pairs"
	echo "pair $p: base $b ms, new $n ms, new÷base $(echo "scale=4; $n / $b" | bc)"
	p=$((p + 1))
done
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) threads; $MODEL $PRECISION, $PAIRS pairs of $STEPS steps"
awk '{ r[NR] = $2 / $1; b[NR] = $1; n[NR] = $2 }
function med(a, k,   i, j, t) {
	for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
END {
	lo = hi = r[1]
	for (i = 2; i <= NR; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
	printf "median ms: base %.3f, new %.3f\n", med(b, NR), med(n, NR)
	printf "new÷base over the pairs: median %.4f, lowest %.4f, highest %.4f\n", med(r, NR), lo, hi
}' "$tmp/pairs"
