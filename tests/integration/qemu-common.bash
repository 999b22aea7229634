# Shared by tests/integration/qemu-*.sh, libvirt-*.sh and tests/bench/qemu-bench.sh
# (sourced, not run: the runner only runs *.sh).
#
# Real QEMU (TCG) guests from the test image that `make images` builds.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
IMG=$BUILD/images
T=""
CLEAN_PIDS=""

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

need_qemu() {
	command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
	command -v python3 >/dev/null 2>&1 || skip "python3 is not installed (scripts/install-deps.sh)"
	[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
	[ -f "$IMG/vmlinuz" ] && [ -f "$IMG/initramfs.cpio.gz" ] ||
		skip "no test image in $IMG: run 'make images'"
}

# mk_tmp NAME: a private directory under $BUILD/tmp, removed at exit.
mk_tmp() {
	mkdir -p "$BUILD/tmp"
	T=$(mktemp -d "$BUILD/tmp/$1.XXXXXX")
	trap cleanup EXIT
}

# Kills what the test started, by pid, then removes its directory.
cleanup() {
	for p in $CLEAN_PIDS; do
		kill "$p" 2>/dev/null
	done
	for p in $CLEAN_PIDS; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.2
		done
		kill -9 "$p" 2>/dev/null
	done
	if [ -n "${CLEANUP_HOOK:-}" ]; then $CLEANUP_HOOK; fi
	[ -n "$T" ] && [ -z "${KEEP:-}" ] && rm -rf "$T"
}

# report_json SESSION [report args...]: opreport -l as JSON on stdout.
report_json() {
	local s=$1
	shift
	"$OPVM" report -l --format json --session-dir "$s" \
		--guest-root "$IMG/root" --system-map "$IMG/System.map" "$@"
}

# no_host_debug CMD...: CMD with the host's /usr/lib/debug hidden (an
# empty tmpfs over it, in a mount namespace of its own), for a control that
# must not take names from debug packages installed on the test machine
# (libc6-dbg names libc by build-id).  As root only; otherwise CMD as is.
no_host_debug() {
	if [ -d /usr/lib/debug ] && [ "$(id -u)" = 0 ]; then
		unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x "$@"
	else
		"$@"
	fi
}

have_report() {
	"$OPVM" report --help >/dev/null 2>&1
}

# truth FILE KEY: the OPVM-TRUTH line of console FILE containing KEY.
truth() {
	grep -a "^OPVM-TRUTH .*$2" "$1" | tail -n 1
}

# no_tcp_listener PID...: fails if any of these processes has a listening
# TCP socket (opvm never opens a debug port; `ss -ltnp` shows the owners).
no_tcp_listener() {
	local out p
	out=$(ss -ltnpH 2>&1) || fail "ss -ltnp failed: $out"
	for p in "$@"; do
		[ -n "$p" ] || fail "no_tcp_listener: empty pid"
		kill -0 "$p" 2>/dev/null || fail "no_tcp_listener: process $p is not running"
		if echo "$out" | grep -q "pid=$p,"; then
			echo "$out" | grep "pid=$p,"
			fail "process $p ($(cat /proc/"$p"/comm 2>/dev/null)) listens on TCP"
		fi
	done
	echo "checked: ss -ltnp shows no TCP listener by $*"
}

# qmp_ctl SOCKET COMMAND [HMP]: one QMP command on a test's own monitor
# (not opvm's), its return as JSON on stdout (the error where it failed);
# with HMP, COMMAND is ignored and the human monitor's text is printed.
qmp_ctl() {
	python3 - "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
def run(cmd, args=None):
    m = {"execute": cmd}
    if args:
        m["arguments"] = args
    f.write(json.dumps(m) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            return r
run("qmp_capabilities")
if len(sys.argv) > 3:
    r = run("human-monitor-command", {"command-line": sys.argv[3]})
    print(r.get("return", json.dumps(r)))
else:
    r = run(sys.argv[2])
    print(json.dumps(r.get("return", r)))
PY
}

# wait_for FILE PATTERN [PID]: until FILE holds PATTERN (grep -a), while
# PID (when given) lives, WAIT_S seconds at most (default 600).  A wait
# judges progress, not speed: a TCG boot on a 2-core host under two busy
# loops and a test run beside it has taken over 150 s.
wait_for() {
	local end=$((SECONDS + ${WAIT_S:-600}))
	while [ "$SECONDS" -lt "$end" ]; do
		grep -aq -- "$2" "$1" 2>/dev/null && return 0
		[ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && break
		sleep 0.2
	done
	grep -aq -- "$2" "$1" 2>/dev/null
}

# boot_channel_guest MEM_MB APPEND [NAME]: the test image under TCG with a
# QMP socket ($T/qmp) and the org.opvm.0 port on $T/chan (and -name NAME);
# waits until its init has loaded opvm.ko.  Sets qpid and CLEAN_PIDS.
boot_channel_guest() {
	qemu-system-x86_64 -accel tcg -m "$1" -smp 2 -nodefaults -display none \
		${3:+-name "$3"} \
		-qmp "unix:$T/qmp,server=on,wait=off" \
		-serial "file:$T/console.log" \
		-device virtio-serial-pci,id=ser \
		-chardev "socket,id=opvm0,path=$T/chan,server=on,wait=off" \
		-device virtserialport,bus=ser.0,chardev=opvm0,name=org.opvm.0 \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet $2" \
		> "$T/qemu.log" 2>&1 &
	qpid=$!
	CLEAN_PIDS="$qpid $CLEAN_PIDS"
	wait_for "$T/console.log" "OPVM-READY" "$qpid"
	grep -aq "OPVM-READY kmod=1" "$T/console.log" || fail "the guest did not load opvm.ko"
}
