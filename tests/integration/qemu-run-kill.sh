#!/bin/bash
# `opvm run` killed with SIGKILL: its QEMU dies with it (PR_SET_PDEATHSIG),
# and the next run removes the private directory it left behind (named
# with the dead opvm's pid).  While it runs: no TCP listener by QEMU or
# opvm, and the gdbstub has no socket in that directory (a socket pair).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-run-kill
export TMPDIR
TMPDIR=$(realpath "$T")
BASE=$TMPDIR/opvm-run-$(id -u)

"$OPVM" run --duration 120 -d "$T/s" --workload abratio > "$T/run.out" 2>&1 &
opid=$!
CLEAN_PIDS=$opid
qpid=""
for _ in $(seq 100); do
	qpid=$(pgrep -P "$opid" qemu-system-x86 | head -1)
	[ -n "$qpid" ] && [ -S "$BASE/$opid/chan" ] && break
	sleep 0.1
done
[ -n "$qpid" ] || { cat "$T/run.out"; fail "opvm run started no QEMU"; }
CLEAN_PIDS="$opid $qpid"
sleep 2
no_tcp_listener "$qpid" "$opid"
[ "$(stat -c %a "$BASE")" = 700 ] && [ "$(stat -c %a "$BASE/$opid")" = 700 ] ||
	fail "the run directories are not private: $(stat -c '%a %n' "$BASE" "$BASE/$opid")"
ls "$BASE/$opid" | grep -q gdb && fail "a gdbstub socket in $BASE/$opid: $(ls "$BASE/$opid")"
grep -q "chardev:opvm-gdb" "/proc/$qpid/cmdline" || fail "QEMU's gdbstub is not opvm's socket pair"

kill -9 "$opid"
wait "$opid" 2>/dev/null
t0=$(date +%s%N)
for _ in $(seq 50); do
	kill -0 "$qpid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$qpid" 2>/dev/null && fail "QEMU ($qpid) still runs 5 s after its opvm was killed"
echo "RESULT QEMU gone $(( ($(date +%s%N) - t0) / 1000000 )) ms after SIGKILL of opvm run"
[ -d "$BASE/$opid" ] || fail "expected the killed run's directory $BASE/$opid"

# The next run (one that fails fast: its QEMU is /bin/false) sweeps it.
"$OPVM" run --qemu false --duration 1 -d "$T/s2" > "$T/run2.out" 2>&1 &&
	fail "a run with --qemu false succeeded"
[ -d "$BASE/$opid" ] && fail "the next run left the stale directory $BASE/$opid"
left=$(ls -A "$BASE")
[ -z "$left" ] || fail "run directories left in $BASE: $left"
echo "RESULT the next run removed the stale directory of pid $opid"
echo PASS
