#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# A local user's "QEMU" whose QMP socket never answers must cost its own
# row only (issue 25).  Beside a real QEMU (TCG, idle, QMP answering) and a
# fake one that answers QMP, three fakes (tests/integration/fake-qemu.py)
# whose QMP sockets listen and never accept: two with a full accept queue
# (a connect() blocks), one that takes the connection and never greets.
#  1. `opvm top --once --format json` ends within its deadline (--delay plus
#     one QMP budget, 1 s, per silent socket, with a margin) and lists the
#     real and the answering guest read in full, the silent ones marked
#     read_ok: false with why;
#  2. `opvm exporter` answers every one of 8 scrapes within 2 s, and says
#     which guests were not read (opvm_guest_read_ok 0);
#  3. SIGTERM ends the interactive `opvm top` (in tmux) within 1 s, while
#     it waits on a silent socket and again once its rows are on the screen.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v tmux >/dev/null 2>&1 || skip "tmux is not installed (scripts/install-deps.sh)"
mk_tmp top-silent
T=$(realpath "$T")
P=q$$
TMUX_SOCK=opvm-silent-$$
stop_tmux() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null; }
CLEANUP_HOOK=stop_tmux
# Each part is checked and the test goes on, so that one run says which of
# the three a build gets wrong (the closing line fails the test).
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

start_real "$P-real" "$T/real.qmp"
start_fake answer "$P-answer" "$T/answer.qmp"
start_fake full "$P-full1" "$T/full1.qmp"
start_fake full "$P-full2" "$T/full2.qmp"
start_fake silent "$P-silent" "$T/silent.qmp"

# ---- 1: top --once -----------------------------------------------------------
# Deadline: 1 s of --delay, then at most 1 s for each of the three silent
# sockets (their second reading skips them), and 7 s of margin for a loaded
# machine.  Today's code blocked in connect() for ever.
once_beside "3 silent QMP sockets" 12 "real answer" "full1 full2 silent"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
g = {x["name"]: x for x in d["guests"]}
sys.exit(g.get(sys.argv[2] + "-answer", {}).get("vcpus") != 1)' "$T/once.json" "$P" 2>/dev/null ||
	bad "the answering guest's vCPU thread (from QMP) was not found"

# ---- 2: the exporter ---------------------------------------------------------
PORT=$(free_port)
start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" --no-libvirt --min-interval 0 ||
	bad "the exporter did not start"
scrapes_within "3 silent QMP sockets" "$PORT" 8
grep -q "^opvm_guest_read_ok{guest=\"$P-full1\"} 0" "$T/m8.txt" 2>/dev/null ||
	bad "the exporter does not mark the silent guest (opvm_guest_read_ok 0)"
grep -q "^opvm_guest_read_ok{guest=\"$P-real\"} 1" "$T/m8.txt" 2>/dev/null ||
	bad "the exporter does not list the real guest as read"
kill "$EXP_PID"

# ---- 3: SIGTERM ends the live view -------------------------------------------
# alive PID: it runs (gone or a zombie tmux has not reaped yet: it ended)
alive() {
	local st
	st=$(sed -n 's/^State:\t\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ]
}
# term_within PID WHEN: SIGTERM to the top in tmux; prints how long it took
# to exit, fails past 1 s.
term_within() {
	local pid=$1 t0 i
	t0=$(date +%s%N)
	kill -TERM "$pid"
	for i in $(seq 200); do
		alive "$pid" || break
		sleep 0.01
	done
	if alive "$pid"; then
		kill -9 "$pid"
		echo "RESULT SIGTERM to the live top $2: still running after 2 s"
		bad "top was still running 2 s after SIGTERM ($2)"
		return
	fi
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	echo "RESULT SIGTERM to the live top $2: it exited after $ms ms"
	[ "$ms" -lt 1000 ] || bad "top took $ms ms to exit after SIGTERM ($2)"
}
# live_top: a new interactive top in tmux; TOP_PID
live_top() {
	rm -f "$T/top.pid"
	tmux -L "$TMUX_SOCK" new-session -d -s "top$1" -x 100 -y 30 \
		"echo \$\$ > $T/top.pid; TERM=xterm exec $(realpath "$OPVM") top --no-libvirt -f $P- -d 1" ||
		fail "cannot start tmux"
	for _ in $(seq 100); do [ -s "$T/top.pid" ] && break; sleep 0.05; done
	TOP_PID=$(cat "$T/top.pid")
}
# (a) while it waits on a silent socket: connect (42) or poll (7) on one
live_top a
for _ in $(seq 200); do
	read -r nr _ < "/proc/$TOP_PID/syscall" 2>/dev/null
	case "$nr" in 42|7) break ;; esac
	sleep 0.01
done
echo "top is in syscall ${nr:-?} (42 connect, 7 poll)"
term_within "$TOP_PID" "blocked on a silent QMP socket"
# (b) with its rows on the screen
live_top b
for _ in $(seq 100); do
	tmux -L "$TMUX_SOCK" capture-pane -p -t topb 2>/dev/null | grep -q "$P-real" && break
	sleep 0.1
done
if tmux -L "$TMUX_SOCK" capture-pane -p -t topb | grep -q "$P-real"; then
	tmux -L "$TMUX_SOCK" capture-pane -p -t topb | grep "$P-"
	term_within "$TOP_PID" "showing its rows"
else
	bad "no rows on the screen after 10 s"
	kill -9 "$TOP_PID"
fi
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
