#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# opvm exporter (root) as another user's deputy (issue 37).  Played as root
# with a second user (nobody, through setpriv), no KVM needed: the refusals
# come before any sampling.
#  1. nobody runs a fake `qemu-system-x86_64 -name EVIL -accel kvm -qmp
#     unix:SOCK` (tests/integration/fake-qemu.py deputy) whose QMP server
#     names a root process (the victim) as its vCPU thread and puts its one
#     RAM range at an address of the victim's.  Asked for a profile of EVIL,
#     the exporter answers 403 with one line saying the thread is not the
#     QEMU's, and strace of the exporter and its children shows no
#     perf_event_open() of the victim and no open of its /proc/PID/mem.
#     Before: the root `opvm attach` child perf_event_open()ed the victim
#     and read its memory.  `opvm attach --qmp SOCK --qemu-pid FAKE` run
#     directly (not under strace: LeakSanitizer cannot run under ptrace, so
#     the strace'd exporter runs without it) exits 3 with that line.
#  2. nobody runs a namesake (`-name WEB`, a fake that answers QMP) of
#     root's real QEMU WEB (TCG, an exporter without --allow-gdbstub): a
#     profile of WEB is root's guest's answer (403, TCG needs
#     --allow-gdbstub), not 409 (two of that name) and not the namesake's;
#     owner=nobody names the namesake; /debug/pprof/guests gives each owner.
#  3. nobody's fake RELAY names as its QMP socket one that another process
#     of nobody's serves (the namesake's): refused (403), the socket's
#     server (SO_PEERCRED) is not the QEMU the exporter found.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v strace >/dev/null 2>&1 || skip "strace is not installed (scripts/install-deps.sh)"
command -v setpriv >/dev/null 2>&1 || skip "setpriv is not installed (util-linux)"
[ "$(id -u)" = 0 ] || skip "needs root, to act as a second user (nobody) with setpriv"
OPVM=$(realpath "$OPVM")
# nobody must reach its sockets' directory: under /tmp
T=$(mktemp -d /tmp/opvm-deputy.XXXXXX)
trap cleanup EXIT
chmod 0711 "$T"
mkdir "$T/nobody" && chown 65534:65534 "$T/nobody"
# nobody must read the fake too: the checkout may sit under a 0700 directory
install -m 0644 "$FAKE_QEMU" "$T/fake-qemu.py" && FAKE_QEMU=$T/fake-qemu.py
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
P=dep$$
EVIL=$P-evil
WEB=$P-web

# the victim: a root process with memory worth reading
/usr/bin/python3 -c 'import time; s = b"opvm-deputy-secret" * 8192; time.sleep(1e6)' &
VICTIM=$!
CLEAN_PIDS="$CLEAN_PIDS $VICTIM"
for _ in $(seq 50); do grep -q heap "/proc/$VICTIM/maps" 2>/dev/null && break; sleep 0.1; done
# an address in one of its mappings of at least 64 KiB
HVA=$(python3 -c '
import sys
for l in open(sys.argv[1]):
    a, b = (int(x, 16) for x in l.split()[0].split("-"))
    if b - a >= 65536:
        print(hex(a)); break' "/proc/$VICTIM/maps")
[ -n "$HVA" ] || fail "no 64 KiB mapping in the victim"

# start_nobody MODE NAME SOCK [ENV=V...]: fake-qemu.py as nobody, -accel kvm,
# -qmp unix:SOCK (unix:$QMP_AT if set)
start_nobody() {
	local mode=$1 name=$2 sock=$3
	shift 3
	env "$@" setpriv --reuid=65534 --regid=65534 --clear-groups \
		bash -c 'exec -a qemu-system-x86_64 /usr/bin/python3 "$@"' fake "$FAKE_QEMU" \
		"$mode" "$sock" -name "$name" -accel kvm \
		-qmp "unix:${QMP_AT:-$sock},server=on,wait=off" > "$sock.out" 2>&1 &
	NOBODY_PID=$!
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 100); do
		grep -q ready "$sock.out" 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$sock.out"
	fail "the fake QEMU '$mode' did not start"
}
start_nobody deputy "$EVIL" "$T/nobody/evil.qmp" FAKE_QEMU_VCPU_TID="$VICTIM" FAKE_QEMU_HVA="$HVA"
EVIL_PID=$NOBODY_PID
start_nobody answer "$WEB" "$T/nobody/web.qmp"
start_real "$WEB" "$T/web.qmp"
QMP_AT=$T/nobody/web.qmp start_nobody none "$P-relay" "$T/nobody/relay.qmp"

PORT=$(free_port)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -o "$T/strace.log" -e trace=perf_event_open,open,openat \
	"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --profile-dir "$T" \
	> "$T/exporter.log" 2>&1 &
EXP_PID=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP_PID"
for _ in $(seq 300); do
	grep -q serving "$T/exporter.log" 2>/dev/null && break
	kill -0 "$EXP_PID" 2>/dev/null || break
	sleep 0.1
done
# the exporter itself too, first: strace ended alone would leave it running
CLEAN_PIDS="$(cat /proc/"$EXP_PID"/task/*/children 2>/dev/null) $CLEAN_PIDS"
grep -q serving "$T/exporter.log" || { cat "$T/exporter.log"; fail "the exporter did not start"; }
U=http://127.0.0.1:$PORT/debug/pprof

# ---- 1: the deputy ------------------------------------------------------------
code=$(curl -s -m 60 -o "$T/evil.txt" -w '%{http_code}' "$U/profile?guest=$EVIL&seconds=1")
echo "RESULT a profile of nobody's lying QEMU (vCPU = root's pid $VICTIM, RAM at $HVA): $code: $(head -c 300 "$T/evil.txt" | tr -cd "[:print:]")"
perf=$(grep -cE "perf_event_open\([^)]*, $VICTIM," "$T/strace.log")
mem=$(grep -c "\"/proc/$VICTIM/mem\"" "$T/strace.log")
echo "RESULT strace of the exporter and its children: $perf perf_event_open() of the victim, $mem opens of its /proc/PID/mem"
[ "$code" = 403 ] || bad "the profile of the lying QEMU was not refused with 403"
[ "$(wc -l < "$T/evil.txt")" = 1 ] && grep -q "not a thread of QEMU process" "$T/evil.txt" ||
	bad "the refusal is not one line saying the vCPU thread is not the QEMU's"
[ "$perf" = 0 ] || bad "the exporter's children perf_event_open()ed the victim"
[ "$mem" = 0 ] || bad "the exporter's children opened the victim's memory"
timeout 60 "$OPVM" attach --qmp "$T/nobody/evil.qmp" --qemu-pid "$EVIL_PID" --sampler perf \
	--duration 1 -d "$T/direct" > "$T/direct.out" 2>&1
rc=$?
msg=$(tr '\n' ' ' < "$T/direct.out" | tr -s ' ')	# one message, wrapped at 80 columns
echo "RESULT opvm attach --qmp (the liar's) --qemu-pid $EVIL_PID: exit $rc: $msg"
[ "$rc" = 3 ] && [ "$(grep -c '^opvm: ' "$T/direct.out")" = 1 ] &&
	grep -q "not a thread of QEMU process $EVIL_PID" <<< "$msg" ||
	bad "attach --qemu-pid did not refuse the liar with exit status 3 and one message"

# ---- 2: a namesake ----------------------------------------------------------
curl -s -m 10 "$U/guests" > "$T/guests.json"
python3 - "$T/guests.json" "$WEB" <<'PY' || bad "/debug/pprof/guests does not give both namesakes with their owners"
import json, sys
g = sorted((x["owner"], x["accel"]) for x in json.load(open(sys.argv[1]))["guests"]
           if x["name"] == sys.argv[2])
print("RESULT /debug/pprof/guests, the two named %s: %s" % (sys.argv[2], g))
sys.exit(0 if g == [("nobody", "kvm"), ("root", "tcg")] else 1)
PY
code=$(curl -s -m 60 -o "$T/web.txt" -w '%{http_code}' "$U/profile?guest=$WEB&seconds=1")
echo "RESULT a profile of $WEB beside nobody's namesake: $code: $(cat "$T/web.txt")"
[ "$code" = 403 ] && grep -q -- "--allow-gdbstub" "$T/web.txt" ||
	bad "the namesake blocked root's guest or stood in for it"
code=$(curl -s -m 60 -o "$T/own.txt" -w '%{http_code}' "$U/profile?guest=$WEB&owner=nobody&seconds=1")
echo "RESULT owner=nobody: $code ($(wc -c < "$T/own.txt") bytes)"
[ "$code" = 200 ] || [ "$code" = 500 ] || bad "owner=nobody did not name the namesake ($code)"

# ---- 3: a QMP socket another process serves -----------------------------------
code=$(curl -s -m 60 -o "$T/relay.txt" -w '%{http_code}' "$U/profile?guest=$P-relay&seconds=1")
echo "RESULT a QEMU whose QMP socket another process serves: $code: $(head -c 300 "$T/relay.txt" | tr -cd '[:print:]')"
[ "$code" = 403 ] && grep -q "is served by process" "$T/relay.txt" ||
	bad "a QMP socket served by another process than the QEMU was not refused"
# the exporter first (strace ends with it)
kill $(cat /proc/"$EXP_PID"/task/*/children 2>/dev/null) 2>/dev/null
wait "$EXP_PID" 2>/dev/null
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
