#!/bin/bash
# opvm test runner: unit tests (cmocka binaries), brief fuzz runs, then
# integration tests (tests/integration/*.sh).
#
# An integration script exits 0 for pass, 77 for skip (after printing
# "SKIP: <reason>"), anything else for failure.  Closes with one line:
#   check: N passed, N failed, N skipped
# Usage: tests/run-tests.sh [--unit|--integration|--fuzz]... [NAME-FILTER]
set -u
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
export BUILD OPVM="$BUILD/opvm"
cd "$(dirname "$0")/.."

want_unit=0 want_int=0 want_fuzz=0 filter=""
for a in "$@"; do
	case "$a" in
	--unit) want_unit=1 ;;
	--integration) want_int=1 ;;
	--fuzz) want_fuzz=1 ;;
	*) filter=$a ;;
	esac
done
if [ $want_unit = 0 ] && [ $want_int = 0 ] && [ $want_fuzz = 0 ]; then
	want_unit=1 want_int=1 want_fuzz=1
fi

passed=0 failed=0 skipped=0 failures=""
logdir=$BUILD/test-logs
mkdir -p "$logdir"

if [ $want_unit = 1 ]; then
	for t in "$BUILD"/tests/test-*; do
		[ -x "$t" ] || continue
		n=$(basename "$t")
		case "$n" in *"$filter"*) ;; *) continue ;; esac
		log=$logdir/$n.log
		if "$t" >"$log" 2>&1; then rc=0; else rc=$?; fi
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
		if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
		if [ "$f" != 0 ]; then
			echo "FAIL  unit $n ($p passed, $f failed)"; failures="$failures $n"
			sed 's/^/    /' "$log" | tail -40
		else
			echo "ok    unit $n ($p passed${s:+, $s skipped})"
		fi
		grep '^SKIP' "$log" | sed 's/^/      /'
	done
fi

if [ $want_fuzz = 1 ]; then
	for t in "$BUILD"/fuzz/fuzz-*; do
		[ -x "$t" ] || continue
		n=$(basename "$t")
		case "$n" in *"$filter"*) ;; *) continue ;; esac
		corpus=tests/fuzz/corpus/${n#fuzz-}
		work=$BUILD/fuzz/check-corpus-$n
		mkdir -p "$work"
		log=$logdir/$n.log
		dirs="$work"; [ -d "$corpus" ] && dirs="$work $corpus"
		# shellcheck disable=SC2086
		if "$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 $dirs >"$log" 2>&1; then
			runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
			echo "ok    fuzz $n (${runs:-?} runs in ${FUZZ_SECONDS}s)"
			passed=$((passed + 1))
		else
			echo "FAIL  fuzz $n"; failures="$failures $n"
			tail -40 "$log" | sed 's/^/    /'
			failed=$((failed + 1))
		fi
	done
fi

# An integration test is killed past INT_TIMEOUT seconds, with what it
# started in its process group (timeout(1) signals the group; opvm, told
# to end, stops its QEMU): a hung guest costs one test, not the whole
# run's time limit.
INT_TIMEOUT=${INT_TIMEOUT:-$([ -n "${OPVM_DISK_TESTS:-}" ] && echo 2400 || echo 600)}
run_limited() {
	timeout -k 20 "$INT_TIMEOUT" bash "$1"
}

if [ $want_int = 1 ]; then
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		n=$(basename "$t" .sh)
		case "$n" in *"$filter"*) ;; *) continue ;; esac
		log=$logdir/int-$n.log
		start=$(date +%s)
		if run_limited "$t" >"$log" 2>&1; then rc=0; else rc=$?; fi
		secs=$(( $(date +%s) - start ))
		[ $rc = 124 ] &&
			echo "TIMEOUT: killed after ${INT_TIMEOUT}s (INT_TIMEOUT)" >>"$log"
		if [ $rc = 0 ]; then
			echo "ok    integration $n (${secs}s)"
			grep -E '^(RESULT|MEASURED)' "$log" | sed 's/^/      /'
			passed=$((passed + 1))
		elif [ $rc = 77 ]; then
			echo "SKIP  integration $n: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP:* *//')"
			skipped=$((skipped + 1))
		else
			echo "FAIL  integration $n (exit $rc, ${secs}s)"; failures="$failures $n"
			tail -60 "$log" | sed 's/^/    /'
			failed=$((failed + 1))
		fi
	done
fi

[ -n "$failures" ] && echo "failed:$failures"
echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
