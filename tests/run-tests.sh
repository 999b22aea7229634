#!/bin/bash
# opvm test runner: unit tests (cmocka binaries), brief fuzz runs, then
# integration tests (tests/integration/*.sh).
#
# An integration script exits 0 for pass, 77 for skip (after printing
# "SKIP: <reason>"), anything else for failure.  Closes with one line:
#   check: N passed, N failed, N skipped
#
# Fuzz targets and integration tests run TEST_JOBS at a time (default 2:
# the suite's time on a 2-core machine; TEST_JOBS=1 runs them one by one).
# A test is no judge of the machine's speed (count-aware bounds, CPU time,
# guest progress), so a neighbour's load changes its figures, not its
# verdict.  A script that sees every guest on the host (opvm top, the
# exporter, libvirt's domains) says so with a line
#   # opvm-test: alone (why)
# and runs with no other test beside it, after the others.
# Usage: tests/run-tests.sh [--unit|--integration|--fuzz]... [NAME-FILTER]
set -u
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
TEST_JOBS=${TEST_JOBS:-2}
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

passed=0 failed=0 skipped=0 failures="" durations="" t_start=$(date +%s)
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

# ---- the job pool: fuzz targets and integration tests ---------------------
# pool_start NAME CMD...: runs CMD in the background (output to its log by
# the caller), at most TEST_JOBS at once; pool_reap waits for one to end
# and reports it (report_fuzz or report_int, by the job's kind).
declare -A job_name=() job_kind=() job_start=()
pool_start() {
	while [ "${#job_name[@]}" -ge "$TEST_JOBS" ]; do pool_reap; done
	local kind=$1 n=$2
	shift 2
	"$@" &
	job_name[$!]=$n job_kind[$!]=$kind job_start[$!]=$(date +%s)
}
pool_reap() {
	local pid rc
	if wait -n -p pid "${!job_name[@]}"; then rc=0; else rc=$?; fi
	[ -n "${pid:-}" ] || return 0
	"report_${job_kind[$pid]}" "${job_name[$pid]}" "$rc" $(( $(date +%s) - job_start[$pid] ))
	unset "job_name[$pid]" "job_kind[$pid]" "job_start[$pid]"
}
pool_drain() {
	while [ "${#job_name[@]}" -gt 0 ]; do pool_reap; done
}

fuzz_one() {	# NAME: one brief fuzz run into its log
	local n=$1 corpus=tests/fuzz/corpus/${1#fuzz-} work=$BUILD/fuzz/check-corpus-$1 dirs
	mkdir -p "$work"
	dirs="$work"; [ -d "$corpus" ] && dirs="$work $corpus"
	# shellcheck disable=SC2086
	"$BUILD/fuzz/$n" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 $dirs \
		>"$logdir/$n.log" 2>&1
}
report_fuzz() {	# NAME RC SECS
	local log=$logdir/$1.log runs
	if [ "$2" = 0 ]; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "ok    fuzz $1 (${runs:-?} runs in ${FUZZ_SECONDS}s)"
		passed=$((passed + 1))
	else
		echo "FAIL  fuzz $1"; failures="$failures $1"
		tail -40 "$log" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
}

if [ $want_fuzz = 1 ]; then
	for t in "$BUILD"/fuzz/fuzz-*; do
		[ -x "$t" ] || continue
		n=$(basename "$t")
		case "$n" in *"$filter"*) ;; *) continue ;; esac
		pool_start fuzz "$n" fuzz_one "$n"
	done
	pool_drain
fi

# An integration test is killed past INT_TIMEOUT seconds, with what it
# started in its process group (timeout(1) signals the group; opvm, told
# to end, stops its QEMU): a hung guest costs one test, not the whole
# run's time limit.  900 s: the longest test (kmod-overhead-debug, 120 s
# on an idle 2-core host) took over 600 s on one held by busy loops and
# other work (load 12).
INT_TIMEOUT=${INT_TIMEOUT:-$([ -n "${OPVM_DISK_TESTS:-}" ] && echo 2400 || echo 900)}
int_one() {	# NAME
	local log=$logdir/int-$1.log rc
	if timeout -k 20 "$INT_TIMEOUT" bash "tests/integration/$1.sh" >"$log" 2>&1 </dev/null
	then rc=0; else rc=$?; fi
	[ $rc = 124 ] && echo "TIMEOUT: killed after ${INT_TIMEOUT}s (INT_TIMEOUT)" >>"$log"
	return $rc
}
report_int() {	# NAME RC SECS
	local n=$1 rc=$2 secs=$3 log=$logdir/int-$1.log
	durations+="$secs $n"$'\n'
	if [ "$rc" = 0 ]; then
		echo "ok    integration $n (${secs}s)"
		grep -E '^(RESULT|MEASURED)' "$log" | sed 's/^/      /'
		passed=$((passed + 1))
	elif [ "$rc" = 77 ]; then
		echo "SKIP  integration $n: $(grep -m1 '^SKIP' "$log" | sed 's/^SKIP:* *//')"
		skipped=$((skipped + 1))
	else
		echo "FAIL  integration $n (exit $rc, ${secs}s)"; failures="$failures $n"
		tail -60 "$log" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
}

if [ $want_int = 1 ]; then
	alone=()
	for t in tests/integration/*.sh; do
		[ -f "$t" ] || continue
		n=$(basename "$t" .sh)
		case "$n" in *"$filter"*) ;; *) continue ;; esac
		if grep -q '^# opvm-test: alone' "$t"; then
			alone+=("$n")
		else
			pool_start int "$n" int_one "$n"
		fi
	done
	pool_drain
	for n in "${alone[@]}"; do
		pool_start int "$n" int_one "$n"
		pool_drain
	done
fi

# Each failure's own words again at the end, where a log cut in the
# middle (a CI's excerpt) still shows them: FAIL lines, else its last lines.
for n in $failures; do
	for log in "$logdir/int-$n.log" "$logdir/$n.log" "$logdir/fuzz-$n.log"; do
		[ -f "$log" ] || continue
		echo "why $n:"
		{ grep -a -m8 -E '^ *(FAIL|not ok|\[  FAILED  \]|ERROR)' "$log" || tail -n 5 "$log"; } |
			cut -c1-300 | sed 's/^ */    /'
		break
	done
done
# where the suite's time went, at the end where an excerpt shows it
[ -n "$durations" ] && echo "slowest: $(printf '%s' "$durations" | sort -rn | head -8 |
	awk '{ printf "%s%s %ss", sep, $2, $1; sep = ", " }'); all $(( $(date +%s) - t_start ))s"
[ -n "$failures" ] && echo "failed:$failures"
echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
