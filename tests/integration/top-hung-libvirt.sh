#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# A libvirtd that does not answer must not hold `opvm top` or the
# exporter's refresh (issue 25).  Beside a real QEMU (TCG, idle, QMP
# answering) and a fake one that answers QMP, the libvirt URI names a fake
# daemon's socket (tests/integration/fake-libvirtd.py): one that accepts and
# never answers (a hung libvirtd), one whose backlog is full (a connect()
# blocks).  No real libvirtd is touched.
#  1. `opvm top --once --format json` ends within its deadline (--delay plus
#     the libvirt budget, 3 s, with a margin) against each, lists the QEMU
#     guests read in full, and says libvirt did not answer;
#  2. `opvm exporter` starts, answers every one of 8 scrapes within 2 s, its
#     reading is fresh (the background refresh is not held) and lists the
#     QEMU guests, with opvm_libvirt_up 0;
#  3. SIGTERM ends the interactive `opvm top` within 1 s while it waits on
#     the silent daemon.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v tmux >/dev/null 2>&1 || skip "tmux is not installed (scripts/install-deps.sh)"
mk_tmp top-hung-libvirt
T=$(realpath "$T")
P=l$$
TMUX_SOCK=opvm-hunglv-$$
stop_tmux() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null; }
CLEANUP_HOOK=stop_tmux
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

# start_daemon MODE SOCK: the fake libvirtd on SOCK
start_daemon() {
	/usr/bin/python3 "$(dirname "$FAKE_QEMU")/fake-libvirtd.py" "$1" "$2" > "$2.out" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 100); do
		grep -q ready "$2.out" 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$2.out"
	fail "the fake libvirtd '$1' did not start"
}
uri() { echo "qemu+unix:///system?socket=$1"; }

start_real "$P-real" "$T/real.qmp"
start_fake answer "$P-answer" "$T/answer.qmp"
start_daemon silent "$T/silent.sock"
start_daemon full "$T/full.sock"

# ---- 1: top --once -----------------------------------------------------------
# Deadline: 1 s of --delay, 3 s of libvirt budget (the second reading does
# not wait on a call still pending), 6 s of margin for a loaded machine.
# Before: blocked in libvirt for ever.
once() {
	local what=$1 sock=$2 start rc took
	start=$(date +%s%N)
	timeout -k 1 10 "$OPVM" top --once --format json -c "$(uri "$sock")" -f "$P-" -d 1 \
		> "$T/once-$what.json" 2> "$T/once-$what.err"
	rc=$?
	took=$(( ($(date +%s%N) - start) / 1000000 ))
	echo "RESULT top --once, libvirt $what: exit $rc after $took ms (deadline 10 s)"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		bad "top --once was still running after 10 s (libvirt $what)"
		return
	elif [ "$rc" != 0 ]; then
		cat "$T/once-$what.err"
		bad "top --once failed ($rc, libvirt $what)"
		return
	fi
	python3 - "$T/once-$what.json" "$P" <<'PY' || bad "top --once does not list the guests right (libvirt $what)"
import json, sys
d = json.load(open(sys.argv[1]))
p = sys.argv[2]
g = {x["name"]: x for x in d["guests"]}
print("RESULT rows:", {n: x["read_ok"] for n, x in g.items()}, "libvirt_error:", d["libvirt_error"])
ok = True
for n in ("real", "answer"):
    if p + "-" + n not in g or not g[p + "-" + n]["read_ok"]:
        print("FAIL: the %s guest is missing or not read" % n); ok = False
if "did not answer" not in d["libvirt_error"]:
    print("FAIL: top does not say libvirt did not answer"); ok = False
sys.exit(0 if ok else 1)
PY
}
once silent "$T/silent.sock"
once full "$T/full.sock"

# ---- 2: the exporter ---------------------------------------------------------
PORT=$(free_port)
if ! start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" \
	-c "$(uri "$T/silent.sock")" --min-interval 0; then
	bad "the exporter did not start within 30 s (it waits on libvirt)"
	kill -9 "$EXP_PID"
else
	slow=0
	for i in $(seq 8); do
		out=$(curl -s -o "$T/m$i.txt" -m 2 -w '%{http_code} %{time_total}' \
			"http://127.0.0.1:$PORT/metrics")
		echo "scrape $i: $out"
		[ "${out%% *}" = 200 ] || slow=$((slow + 1))
		sleep 0.5
	done
	echo "RESULT exporter, libvirt silent: $((8 - slow)) of 8 scrapes answered within 2 s"
	[ "$slow" = 0 ] || bad "$slow of 8 scrapes were not answered within 2 s"
	grep -E "^opvm_exporter_reading_age_seconds|^opvm_libvirt_up|^opvm_guest_read_ok" "$T/m8.txt"
	grep -q "^opvm_guest_read_ok{guest=\"$P-real\"} 1" "$T/m8.txt" 2>/dev/null ||
		bad "the exporter does not list the real guest as read"
	grep -q "^opvm_libvirt_up 0" "$T/m8.txt" 2>/dev/null ||
		bad "the exporter does not say libvirt is down"
	# the background refresh runs (every 1 s with --min-interval 0) and
	# is not held by libvirt: the reading served is younger than 5 s
	awk '/^opvm_exporter_reading_age_seconds / { exit !($2 < 5) }' "$T/m8.txt" ||
		bad "the exporter's reading is stale: its refresh is held"
	kill "$EXP_PID"
fi

# ---- 3: SIGTERM ends the live view -------------------------------------------
rm -f "$T/top.pid"
tmux -L "$TMUX_SOCK" new-session -d -s top -x 100 -y 30 \
	"echo \$\$ > $T/top.pid; TERM=xterm exec $(realpath "$OPVM") top -c '$(uri "$T/silent.sock")' -f $P- -d 1" ||
	fail "cannot start tmux"
for _ in $(seq 100); do [ -s "$T/top.pid" ] && break; sleep 0.05; done
TOP_PID=$(cat "$T/top.pid")
sleep 0.5	# in its first reading, waiting on libvirt
t0=$(date +%s%N)
kill -TERM "$TOP_PID"
for _ in $(seq 200); do
	st=$(sed -n 's/^State:\t\(.\).*/\1/p' "/proc/$TOP_PID/status" 2>/dev/null)
	{ [ -z "$st" ] || [ "$st" = Z ]; } && break
	sleep 0.01
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ -n "$st" ] && [ "$st" != Z ]; then
	kill -9 "$TOP_PID"
	echo "RESULT SIGTERM to the live top waiting on libvirt: still running after 2 s"
	bad "top was still running 2 s after SIGTERM"
else
	echo "RESULT SIGTERM to the live top waiting on libvirt: it exited after $ms ms"
	[ "$ms" -lt 1000 ] || bad "top took $ms ms to exit after SIGTERM"
fi
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
