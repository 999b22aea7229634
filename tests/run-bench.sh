#!/bin/bash
# Runs every benchmark; each prints "name: value unit" lines.  Integration
# benchmarks (tests/bench/*.sh) may print SKIP: reason instead.
#
# A figure with a target carries it on its line:
#   name: value unit (target <= T)        or (target >= T)
# This script checks each such line and its last line counts the figures
# that miss their targets ("bench-targets: M of N figures miss their
# targets").  --check runs only the benchmarks marked "# bench-check" in
# their first 40 lines (deterministic figures: guest instructions under
# QEMU -icount, never host wall-clock time) and exits 1 when one of their
# figures misses its target or the benchmark fails (make bench-check).
set -u
BUILD=${BUILD:-build}
export BUILD OPVM="$BUILD/opvm"
cd "$(dirname "$0")/.."
CHECK=0
[ "${1:-}" = --check ] && CHECK=1
rc=0
out=$(mktemp)
all=$out.all
: >"$all"
trap 'rm -f "$out" "$all"' EXIT

# run_one CMD...: runs a benchmark, its stdout also kept for the targets
run_one() {
	local st
	"$@" | tee "$out"
	st=${PIPESTATUS[0]}
	cat "$out" >>"$all"
	return "$st"
}

if [ "$CHECK" = 0 ]; then
	for b in "$BUILD"/bench/bench-*; do
		[ -x "$b" ] || continue
		run_one "$b" || { echo "bench $(basename "$b") failed" >&2; rc=1; }
	done
fi
for b in tests/bench/*.sh; do
	[ -f "$b" ] || continue
	if [ "$CHECK" = 1 ] && ! head -40 "$b" | grep -q '^# bench-check'; then
		continue
	fi
	run_one bash "$b" || { [ $? = 77 ] || { echo "bench $(basename "$b") failed" >&2; rc=1; }; }
done
# value op target on each line that has a target; prints the misses
awk '
match($0, /\(target (<=|>=|<|>) -?[0-9.]+/) {
	split(substr($0, RSTART + 8, RLENGTH - 8), t, " ")
	v = $2 + 0; lim = t[2] + 0; n++
	ok = (t[1] == "<=" && v <= lim) || (t[1] == ">=" && v >= lim) ||
	     (t[1] == "<" && v < lim) || (t[1] == ">" && v > lim)
	if (!ok) { miss++; print "bench-miss: " $0 }
}
END { printf "bench-targets: %d of %d figures miss their targets\n", miss, n
      exit miss > 0 }' "$all" || { [ "$CHECK" = 1 ] && rc=1; }
exit $rc
