#!/bin/bash
# Runs every benchmark; each prints "name: value unit" lines.  Integration
# benchmarks (tests/bench/*.sh) may print SKIP: reason instead.
set -u
BUILD=${BUILD:-build}
export BUILD OPVM="$BUILD/opvm"
cd "$(dirname "$0")/.."
rc=0
for b in "$BUILD"/bench/bench-*; do
	[ -x "$b" ] || continue
	"$b" || { echo "bench $(basename "$b") failed" >&2; rc=1; }
done
for b in tests/bench/*.sh; do
	[ -f "$b" ] || continue
	bash "$b" || { [ $? = 77 ] || { echo "bench $(basename "$b") failed" >&2; rc=1; }; }
done
exit $rc
