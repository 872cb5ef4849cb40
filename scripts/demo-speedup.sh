#!/bin/sh
# demo-speedup.sh [BASE [NEW]]: make demo's run (examples/fashion -model cnn
# -precision auto -epochs $EPOCHS, the main job) built at two commits, alternating
# rounds in one run, and the median wall time, training time and test accuracy of
# each, with new÷base. BASE defaults to 0bab6a2, the last commit before issue 11's
# work (the code the issue measured); NEW to HEAD. ROUNDS (default 2) and EPOCHS
# (default 2, as make demo) set the run; DATA the Fashion-MNIST directory.
set -eu
BASE=${1:-0bab6a2}
NEW=${2:-HEAD}
ROUNDS=${ROUNDS:-2}
EPOCHS=${EPOCHS:-2}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
GO=${GO:-go}
root=$(git rev-parse --show-toplevel)
"$root/scripts/ensure-data.sh" "$DATA"
tmp=$(mktemp -d)
trap 'for w in "$tmp"/wt-*; do [ -d "$w" ] && git -C "$root" worktree remove --force "$w"; done; rm -rf "$tmp"' EXIT
for side in base new; do
	rev=$BASE
	[ "$side" = new ] && rev=$NEW
	git -C "$root" worktree add --detach "$tmp/wt-$side" "$rev" >/dev/null 2>&1
	(cd "$tmp/wt-$side" && "$GO" build -o "$tmp/fashion-$side" ./examples/fashion)
	echo "$side: $(git -C "$root" rev-parse --short "$rev")"
done
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for side in base new; do
		s=$(date +%s.%N)
		"$tmp/fashion-$side" -model cnn -precision auto -epochs "$EPOCHS" -data "$DATA" -quiet -json >"$tmp/out" 2>&1
		e=$(date +%s.%N)
		j=$(tail -n 1 "$tmp/out")
		train=$(echo "$j" | sed -n 's/.*"train_seconds":\([0-9.e+-]*\).*/\1/p')
		acc=$(echo "$j" | sed -n 's/.*"test_accuracy":\([0-9.e+-]*\).*/\1/p')
		echo "$side $(echo "$e - $s" | bc) $train $acc" >>"$tmp/rounds"
		echo "round $r $side: wall $(echo "$e - $s" | bc) s, train $train s, test accuracy $acc"
	done
	r=$((r + 1))
done
med() { # median of column $2 for side $1
	awk -v s="$1" -v c="$2" '$1 == s { print $c }' "$tmp/rounds" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
bw=$(med base 2)
nw=$(med new 2)
bt=$(med base 3)
nt=$(med new 3)
echo
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) threads; $ROUNDS rounds, medians"
echo "| | wall s | train s | test accuracy |"
echo "|---|---|---|---|"
echo "| base | $bw | $bt | $(awk '$1 == "base" { print $4 }' "$tmp/rounds" | sort -u | paste -sd/) |"
echo "| new | $nw | $nt | $(awk '$1 == "new" { print $4 }' "$tmp/rounds" | sort -u | paste -sd/) |"
echo "new÷base: wall $(echo "scale=3; $nw / $bw" | bc), train $(echo "scale=3; $nt / $bt" | bc)"
