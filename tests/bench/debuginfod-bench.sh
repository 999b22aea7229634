#!/bin/bash
# The report's time with debuginfod answers cached vs not: the report
# fixture (tests/golden/fixture.h) with its program stripped out of the
# guest root, its debug file and libfix.so's served by a real `debuginfod`
# (Debian's package) on loopback over a directory of ELF files (-F).
#   debuginfod-report-cold:   ms of `opvm report -l` with an empty client
#                             cache (requests, downloads, negative answers)
#   debuginfod-report-cached: ms of the same report again (the client's
#                             cache on disk answers; no request is made)
#   debuginfod-report-off:    ms with DEBUGINFOD_URLS unset, for reference
#   debuginfod-requests-cold, -cached: requests per report (cached: none)
#   ...-cpu:                  the report's user+system CPU time, ms
# Medians of 9 runs each (DEBUGINFOD_BENCH_RUNS); wall clock and CPU time
# (bash's time, to 0.1 ms): compare within one sitting.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
command -v debuginfod >/dev/null || { echo "SKIP: debuginfod is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }
fixture_tmp debuginfod-bench
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
make_fixture "$tmp" > /dev/null
prog=$root/usr/bin/prog
bid=$(readelf -n "$prog" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
mkdir -p "$tmp/srv" "$tmp/emptyroot"
objcopy --only-keep-debug "$prog" "$tmp/srv/prog.debug"
objcopy --only-keep-debug "$root/usr/lib/libfix.so" "$tmp/srv/libfix.debug"
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
debuginfod -F -p "$P" -d "$tmp/db.sqlite" -t 0 -g 0 "$tmp/srv" > "$tmp/dbgd.log" 2>&1 &
pid=$!
for _ in $(seq 240); do
	c=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/buildid/$bid/debuginfo")
	[ "$c" = 200 ] && break
	sleep 0.5
done
[ "$c" = 200 ] || { echo "SKIP: debuginfod did not serve the fixture's debug file"; exit 77; }
# bash's time (getrusage: microseconds), not /usr/bin/time's %e %U %S
# (hundredths: a report of a few ms read 0 ms of CPU, its wall time 10 or
# 20 ms at random)
run() {	# run CACHE URLS: "wall-ms cpu-ms" of one report
	local TIMEFORMAT='%3R %3U %3S'
	if ! { time DEBUGINFOD_URLS=$2 DEBUGINFOD_CACHE_PATH=$1 \
		"$OPVM" report -l --session-dir "$session" \
		--guest-root "$tmp/emptyroot" --no-host-kernel > "$tmp/out.txt" 2>&1; } 2> "$tmp/time"
	then
		cat "$tmp/out.txt" >&2; echo "FAIL: report" >&2; exit 1
	fi
	awk '{ printf "%.1f %.1f\n", $1 * 1000, ($2 + $3) * 1000 }' "$tmp/time"
}
N=${DEBUGINFOD_BENCH_RUNS:-9}
# med COLUMN: the median of that column of the runs on stdin
med() { awk -v c="$1" '{ print $c }' | sort -n | sed -n "$(( (N + 1) / 2 ))p"; }
reqs() { grep -c 'UA:elfutils.*GET /buildid/' "$tmp/dbgd.log"; }
n0=$(reqs)
for i in $(seq $N); do run "$tmp/cache-$i" "http://127.0.0.1:$P"; done > "$tmp/cold"
n1=$(reqs)
grep -q func_b "$tmp/out.txt" || { echo "FAIL: the report did not name func_b" >&2; exit 1; }
for i in $(seq $N); do run "$tmp/cache-1" "http://127.0.0.1:$P"; done > "$tmp/cached"
n2=$(reqs)
for i in $(seq $N); do run "$tmp/cache-1" ""; done > "$tmp/off"
for k in cold cached off; do
	echo "debuginfod-report-$k: $(med 1 < "$tmp/$k") ms"
	echo "debuginfod-report-$k-cpu: $(med 2 < "$tmp/$k") ms"
done
echo "debuginfod-requests-cold: $(( (n1 - n0) / N )) per report"
echo "debuginfod-requests-cached: $(( (n2 - n1) / N )) per report (target <= 0)"
