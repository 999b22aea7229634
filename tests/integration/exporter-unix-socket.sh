#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# `opvm exporter --listen unix:PATH` against another local user (issue 25).
# Played as root with a second user (nobody, through setpriv):
#  1. a directory others may write (mode 0777, not sticky): the exporter
#     refuses it and says so.  Before, it served there, and the other user
#     moved its socket away and put one of its own in its place: scrapes got
#     the other user's metrics;
#  2. same directory, the exporter held (strace) between creating its socket
#     and setting its mode: the other user swaps the socket for a link to a
#     file of root's (mode 0600).  Before, the exporter's chmod went through
#     the link (the file became 0660); now nothing of it changes;
#  3. under umask 000, in a private directory: the socket has mode 0660 from
#     the moment it exists (strace holds the exporter before listen()), the
#     other user cannot connect, root can.
. "$(dirname "$0")/qemu-common.bash"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v strace >/dev/null 2>&1 || skip "strace is not installed (scripts/install-deps.sh)"
command -v setpriv >/dev/null 2>&1 || skip "setpriv is not installed (util-linux)"
[ "$(id -u)" = 0 ] || skip "needs root, to act as a second user (nobody) with setpriv"
OPVM=$(realpath "$OPVM")
# sun_path is 108 bytes, and nobody must reach the directory: under /tmp
T=$(mktemp -d /tmp/opvm-unix.XXXXXX)
trap cleanup EXIT
chmod 0711 "$T"
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# exporter LOG [strace args --] ARGS...: started in the background; EXP_PID.
# wait_up LOG: 0 once it serves, 1 once it has exited (or after 15 s)
wait_up() {
	for _ in $(seq 150); do
		grep -q serving "$1" 2>/dev/null && return 0
		kill -0 "$EXP_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# stop_exporter: SIGTERM to the exporter (under strace: to strace's child,
# strace then ends with it)
stop_exporter() {
	local c
	c=$(cat /proc/"$EXP_PID"/task/*/children 2>/dev/null)
	kill ${c:-$EXP_PID} 2>/dev/null
	wait "$EXP_PID" 2>/dev/null
}

# ---- 1: a directory others may write -----------------------------------------
mkdir "$T/pub" && chmod 0777 "$T/pub"
"$OPVM" exporter --listen "unix:$T/pub/exp.sock" --no-libvirt > "$T/1.log" 2>&1 &
EXP_PID=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP_PID"
if wait_up "$T/1.log"; then
	# the other user's socket in its place
	as_nobody mv "$T/pub/exp.sock" "$T/pub/moved.sock"
	as_nobody /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.recv(4096)
    c.sendall(b"HTTP/1.0 200 OK\r\n\r\nopvm_libvirt_up 42\n"); c.close()' "$T/pub/exp.sock" > "$T/thief.out" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 50); do grep -q ready "$T/thief.out" && break; sleep 0.1; done
	got=$(curl -s -m 5 --unix-socket "$T/pub/exp.sock" http://localhost/metrics | grep '^opvm_libvirt_up')
	echo "RESULT unix socket in a directory others write: the exporter served; a scrape then got '$got'"
	bad "the exporter served from a directory others can write"
	stop_exporter
else
	echo "RESULT unix socket in a directory others write: refused: $(grep -i error "$T/1.log" | head -1)"
	grep -q "$T/pub" "$T/1.log" || bad "the refusal does not name the directory"
fi

# ---- 2: a link in place of the socket before its mode is set ----------------
rm -f "$T/pub/"*.sock
echo secret > "$T/victim" && chmod 0600 "$T/victim"
strace -f -qq -o /dev/null -e trace=chmod,fchmodat,listen \
	-e inject=chmod,fchmodat,listen:delay_enter=2000000 \
	"$OPVM" exporter --listen "unix:$T/pub/exp.sock" --no-libvirt > "$T/2.log" 2>&1 &
EXP_PID=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP_PID"
for _ in $(seq 100); do [ -S "$T/pub/exp.sock" ] && break; kill -0 $EXP_PID 2>/dev/null || break; sleep 0.05; done
if [ -S "$T/pub/exp.sock" ]; then
	as_nobody sh -c "rm -f '$T/pub/exp.sock' && ln -s '$T/victim' '$T/pub/exp.sock'"
fi
wait_up "$T/2.log"
mode=$(stat -c %a "$T/victim")
echo "RESULT link swapped for the socket while the exporter starts: root's 0600 file is now $mode"
[ "$mode" = 600 ] || bad "the exporter changed the mode of a file through a link ($mode)"
stop_exporter
rm -f "$T/pub/exp.sock"

# ---- 3: umask 000, private directory -----------------------------------------
mkdir -m 0755 "$T/priv"
(umask 000; exec strace -f -qq -o /dev/null -e trace=chmod,fchmodat,listen \
	-e inject=chmod,fchmodat,listen:delay_enter=2000000 \
	"$OPVM" exporter --listen "unix:$T/priv/exp.sock" --no-libvirt) > "$T/3.log" 2>&1 &
EXP_PID=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP_PID"
for _ in $(seq 100); do [ -S "$T/priv/exp.sock" ] && break; sleep 0.02; done
early=$(stat -c %a "$T/priv/exp.sock" 2>/dev/null)
if wait_up "$T/3.log"; then
	late=$(stat -c %a "$T/priv/exp.sock")
	if as_nobody curl -s -m 5 --unix-socket "$T/priv/exp.sock" http://localhost/metrics > /dev/null; then
		other=connected
	else
		other=refused
	fi
	curl -s -m 5 --unix-socket "$T/priv/exp.sock" http://localhost/metrics | grep -q '^opvm_libvirt_up' &&
		owner=served || owner=failed
	echo "RESULT umask 000: socket mode $early when it appears, $late serving; another user $other, root $owner"
	[ "$early" = 660 ] || bad "the socket was mode $early before its mode was set"
	[ "$late" = 660 ] || bad "the socket is mode $late"
	[ "$other" = refused ] || bad "another user connected"
	[ "$owner" = served ] || bad "root was not served"
else
	cat "$T/3.log"
	bad "the exporter did not start in a private directory"
fi
stop_exporter
[ -e "$T/priv/exp.sock" ] && bad "the exporter left its socket behind"
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
