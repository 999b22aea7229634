#!/bin/bash
# guest-module-overhead: what opvm.ko costs inside the guest.
# bench-check: guest instructions (icount), deterministic: make bench-check
#
# Boots the test image under QEMU TCG without opvm.ko, with it (and its
# relay) and a host end of the channel that only reads (and says it needs
# no kernel symbols, as a host with introspection or a System.map does for
# vmlinux's: docs/protocol.md, KSYMS word), and with it and
# `opvm attach` at the host end (BENCH_ATTACH=0 leaves that boot out), and
# runs three workloads in the guest:
#   pingpong  - a pipe ping-pong between two processes: a context-switch
#               storm, every switch runs the module's sched_switch hook;
#   cpuloop   - a CPU-bound loop: only timer ticks and the module's own
#               background work can slow it;
#   forker    - fork+exec+exit of a tiny static program: the module's
#               worst case, every child costs PROC, EXEC, MMAP and PROC_EXIT
#               records (including the worker and the relay's time).
# Each reports the median of its repetitions after a warm-up one.
#
# QEMU runs with -icount shift=0: the guest's clock advances one nanosecond
# per guest instruction, so the timings count guest instructions and do not
# depend on how busy the host is.  BENCH_ICOUNT=0 uses real time instead
# (noisy on a shared machine).
#
# Prints, with their targets (tests/run-bench.sh checks them):
#   kmod-overhead-switch: X % (target <= 2)
#   kmod-overhead-cpu: X % (target <= 0.5)
#   kmod-overhead-fork: X % (target <= 5)
#   kmod-overhead-switch-mean, kmod-overhead-cpu-mean: X %, the same
#     from the means of the repetitions (a slow repetition counts)
#   kmod-relay-cpu: X % (target <= 0.5): the relay's CPU time (relaying
#     records and sending kernel symbols) in % of the guest's busy time
#     while it ran, with the host end that only reads
# the same with opvm attached (kmod-overhead-*-attached), the relay's share
# of the samples opvm took (kmod-relay-share: X % (target <= 0.5)), and the
# raw figures (unit icount-ns: guest instructions, or ns with
# BENCH_ICOUNT=0).  The gdbstub's stops do not advance an icount guest's
# clock, so sampling does not count in the attached figures; what opvm
# makes the guest do (HELLO, the walk, kernel symbols, files) does.
# Env: BUILD (default build), BENCH_REPS, BENCH_PINGPONG_ROUNDS,
# BENCH_CPULOOP_ITERS, BENCH_FORKS, BENCH_ATTACH, BENCH_INITRD (another
# initramfs, e.g. the image's with a debug file appended, as
# tests/integration/fetch-debug-file.sh makes one, to measure what
# sending it costs the attached guest), BENCH_PRE (workloads run before the
# measured ones, e.g. libcmix:1+ gives libc samples, so the attached host
# asks for libc's debug file and the relay sends it, paced, while the
# measured workloads run: tests/integration/kmod-overhead-debug.sh),
# BENCH_BOOT_SECS (a boot's limit, 170 s).
set -u
BUILD=${BUILD:-build}
ROUNDS=${BENCH_PINGPONG_ROUNDS:-2000}
ITERS=${BENCH_CPULOOP_ITERS:-5000000}
REPS=${BENCH_REPS:-5}
FORKS=${BENCH_FORKS:-300}
ICOUNT=${BENCH_ICOUNT:-1}
ATTACH=${BENCH_ATTACH:-1}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."

for t in qemu-system-x86_64 python3; do
	if ! command -v $t >/dev/null; then
		echo "SKIP: $t not installed (scripts/install-deps.sh)"
		exit 77
	fi
done
if ! make -s images BUILD="$BUILD" >"$BUILD/images-build.log" 2>&1; then
	tail -20 "$BUILD/images-build.log" >&2
	echo "guest-module-overhead: make images failed" >&2
	exit 1
fi
IMG=$BUILD/images
mkdir -p "$BUILD/tmp"
T=$(mktemp -d "$BUILD/tmp/kmod-overhead.XXXXXX")
QPID=
RPID=
APID=
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null
	[ -n "$APID" ] && kill "$APID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

accel="-accel tcg"
[ "$ICOUNT" = 1 ] && accel="$accel -icount shift=0"

# boot NAME KMOD [attach]: runs the workloads, leaves the console in
# $T/console-NAME.log; the host end of the channel is a reader, or with
# "attach" opvm attach (session $T/s-NAME)
boot() {
	local name=$1 k=$2 sock=$T/ch$1.sock qmp=$T/qmp$1.sock
	# shellcheck disable=SC2086
	qemu-system-x86_64 $accel -m 512 -smp 1 -nographic -no-reboot \
		-kernel "$IMG/vmlinuz" -initrd "${BENCH_INITRD:-$IMG/initramfs.cpio.gz}" \
		-append "console=ttyS0 quiet opvm.kmod=$k opvm.workload=${BENCH_PRE:-}pingpong:$ROUNDS,$REPS+cpuloop:$ITERS,$REPS+forker:$FORKS" \
		-qmp unix:"$qmp",server=on,wait=off \
		-device virtio-serial-pci \
		-chardev socket,id=ch0,path="$sock",server=on,wait=off \
		-device virtserialport,chardev=ch0,name=org.opvm.0 \
		</dev/null >"$T/console-$name.log" 2>&1 &
	QPID=$!
	if [ "${3:-}" = attach ]; then
		for _ in $(seq 100); do [ -S "$qmp" ] && break; sleep 0.05; done
		"$OPVM" attach --qmp "$qmp" --channel "$sock" --name bench -F 100 \
			-d "$T/s-$name" >"$T/attach-$name.log" 2>&1 &
		APID=$!
	else
		reader "$sock"
	fi
	for _ in $(seq $((${BENCH_BOOT_SECS:-170} * 10))); do
		kill -0 "$QPID" 2>/dev/null || break
		sleep 0.1
	done
	kill "$QPID" 2>/dev/null
	wait "$QPID" 2>/dev/null
	QPID=
	for p in $RPID $APID; do
		kill -INT "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	RPID=
	APID=
}

# reader SOCK [WORD]: a host end that only reads, and after the first
# bytes (the relay's HELLO) says what kernel symbols it wants
# (OPVM_REQ_KSYMS, guest-kmod/opvm_proto.h): WORD 0 (the default) none,
# like a host that has them from introspection or a System.map, 1 all, 2
# the modules'; "silent" says nothing (a host that predates the word: the
# relay sends all after OPVM_KSYMS_WAIT_MS)
reader() {
	python3 - "$1" "${2:-0}" <<'PY' &
import socket, struct, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(600):
    try:
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(0)
word = None if sys.argv[2] == "silent" else int(sys.argv[2])
while s.recv(65536):
    if word is not None:
        # magic, type 65 (REQ_KSYMS), len 72, seq, reserved; want, flags
        s.sendall(struct.pack("<HHIIIII48x", 0x564f, 65, 72, 0, 0, word, 0))
        word = None
PY
	RPID=$!
}

value() {	# value KMOD KEY -> the final (median) figure
	sed -n "s/^OPVM-BENCH $2=\([0-9.]*\).*/\1/p" "$T/console-$1.log" | tail -n 1
}

# mean KMOD WORKLOAD KEY -> the mean of the repetitions after the warm-up
# one: unlike the median, a slow repetition counts (a burst of the relay's
# that lands in one rep in four moves the mean, never the median)
mean() {
	sed -n "s/^OPVM-BENCH $2 rep=[1-9][0-9]* $3=\([0-9.]*\).*/\1/p" "$T/console-$1.log" |
		awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n }'
}

# pct WITH WITHOUT DIGITS: (WITH - WITHOUT) / WITHOUT in %
pct() {
	python3 -c "print('%.${3}f' % ((float('$1') - float('$2')) / float('$2') * 100))"
}

# figures NAME SUFFIX: the workloads' figures of boot NAME against boot 0
figures() {
	local pp cl fk sfx=$2
	pp=$(value "$1" "pingpong ns_per_roundtrip")
	cl=$(value "$1" "cpuloop ns")
	fk=$(value "$1" "forker ns_per_child")
	if [ -z "$pp" ] || [ -z "$cl" ] || [ -z "$fk" ]; then
		tail -5 "$T/console-$1.log" >&2
		echo "guest-module-overhead: a workload did not report (console above)" >&2
		return 1
	fi
	echo "kmod-pingpong-roundtrip-with$sfx: $pp $unit"
	echo "kmod-cpuloop-with$sfx: $cl $unit"
	echo "kmod-fork-exec-with$sfx: $fk $unit"
	echo "kmod-overhead-switch$sfx: $(pct "$pp" "$pp0" 2) % (target <= 2)"
	echo "kmod-overhead-cpu$sfx: $(pct "$cl" "$cl0" 3) % (target <= 0.5)"
	echo "kmod-overhead-fork$sfx: $(pct "$fk" "$fk0" 1) % (target <= 5)"
	pp=$(mean "$1" pingpong ns_per_roundtrip)
	cl=$(mean "$1" cpuloop ns)
	[ -n "$pp" ] && [ -n "$cl" ] && [ -n "$ppm0" ] && [ -n "$clm0" ] || return 0
	echo "kmod-overhead-switch-mean$sfx: $(pct "$pp" "$ppm0" 2) %"
	echo "kmod-overhead-cpu-mean$sfx: $(pct "$cl" "$clm0" 3) %"
}

# relay_cpu NAME: the relay's CPU time against the guest's busy time while
# it ran (its exit line; icount: both in guest instructions, so unlike
# kmod-relay-share it does not depend on how fast the host ran the guest)
relay_cpu() {
	local l
	l=$(grep -a "^opvm-relay: used .* ms of CPU" "$T/console-$1.log" | tail -n 1)
	if [ -z "$l" ]; then
		tail -5 "$T/console-$1.log" >&2
		echo "guest-module-overhead: the relay printed no CPU time (console above)" >&2
		return 1
	fi
	# the host's words on the kernel's symbols, per host session
	echo "$l" | sed -n 's/.*hosts asked for all \([0-9]*\), modules. \([0-9]*\), none \([0-9]*\), silent \([0-9]*\)).*/kmod-relay-ksyms-asked: all \1, modules \2, none \3, silent \4/p'
	echo "$l" | sed 's/^opvm-relay: used \([0-9.]*\) ms of CPU, \([0-9.]*\) % of the \([0-9.]*\) ms[^(]*(kernel symbols \([0-9.]*\) ms[;)].*/kmod-relay-cpu-ms: \1 ms (kernel symbols \4 ms) of \3 busy\nkmod-relay-cpu: \2 % (target <= 0.5)/'
}

# relay_share NAME: the relay's share of the samples opvm attach took, and
# the binaries it sent meanwhile (FETCH: only those not in the host's
# build-id cache yet, so a first session after the guest's binaries
# changed sends more and its share is higher)
relay_share() {
	grep -a "^opvm-relay: relayed" "$T/console-$1.log" | tail -n 1 |
		sed -n 's/.* sent \([0-9]*\) files (\([0-9]*\) bytes).*/kmod-relay-files-attached: \1 files, \2 bytes/p'
	# the debug files' CPU time, paced apart (opvm-relay.c, DEBUG_CPU_SHARE)
	grep -a "^opvm-relay: debug files used" "$T/console-$1.log" | tail -n 1 |
		sed -n 's/^opvm-relay: debug files used \([0-9.]*\) ms.*/kmod-relay-debug-cpu-attached: \1 ms/p'
	"$OPVM" report -d "$T/s-$1" --by app --format json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)
tot = r.get("total_samples") or 0
relay = sum(s["samples"] for s in r["symbols"] if "opvm-relay" in (s.get("app") or ""))
if not tot:
    sys.exit("guest-module-overhead: opvm attach took no samples")
print("kmod-relay-samples: %d of %d" % (relay, tot))
print("kmod-relay-share: %.2f %% (target <= 0.5)" % (100.0 * relay / tot))'
}

boot 0 0
boot 1 1
[ "$ATTACH" = 1 ] && boot 2 1 attach
if grep -q "insmod opvm.ko failed" "$T/console-1.log"; then
	echo "guest-module-overhead: opvm.ko did not load in the guest" >&2
	exit 1
fi
unit=ns
[ "$ICOUNT" = 1 ] && unit="icount-ns"
pp0=$(value 0 "pingpong ns_per_roundtrip")
cl0=$(value 0 "cpuloop ns")
fk0=$(value 0 "forker ns_per_child")
if [ -z "$pp0" ] || [ -z "$cl0" ] || [ -z "$fk0" ]; then
	tail -5 "$T/console-0.log" >&2
	echo "guest-module-overhead: a workload did not report (console above)" >&2
	exit 1
fi
ppm0=$(mean 0 pingpong ns_per_roundtrip)
clm0=$(mean 0 cpuloop ns)
echo "kmod-pingpong-roundtrip-without: $pp0 $unit"
echo "kmod-cpuloop-without: $cl0 $unit"
echo "kmod-fork-exec-without: $fk0 $unit"
figures 1 "" || exit 1
relay_cpu 1 || exit 1
if [ "$ATTACH" = 1 ]; then
	if ! figures 2 -attached; then
		tail -5 "$T/attach-2.log" >&2
		exit 1
	fi
	relay_share 2 || { tail -5 "$T/attach-2.log" >&2; exit 1; }
fi
