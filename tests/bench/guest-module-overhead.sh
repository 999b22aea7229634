#!/bin/bash
# guest-module-overhead: what opvm.ko costs inside the guest.
#
# Boots the test image twice under QEMU TCG, without and with opvm.ko (and
# its relay, with the host end of the channel being read), and runs two
# workloads in the guest:
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
# Prints:
#   kmod-overhead-switch: X %      (target < 5 %)
#   kmod-overhead-cpu: X %         (target < 1 %)
#   kmod-overhead-fork: X %
# and the raw figures (unit icount-ns: guest instructions, or ns with
# BENCH_ICOUNT=0).  Env: BUILD (default build).
set -u
BUILD=${BUILD:-build}
ROUNDS=${BENCH_PINGPONG_ROUNDS:-2000}
ITERS=${BENCH_CPULOOP_ITERS:-5000000}
REPS=${BENCH_REPS:-5}
FORKS=${BENCH_FORKS:-300}
ICOUNT=${BENCH_ICOUNT:-1}
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
cleanup() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

accel="-accel tcg"
[ "$ICOUNT" = 1 ] && accel="$accel -icount shift=0"

# boot KMOD: runs both workloads, leaves the console in $T/console-KMOD.log
boot() {
	local k=$1 sock=$T/ch$1.sock
	# shellcheck disable=SC2086
	qemu-system-x86_64 $accel -m 512 -smp 1 -nographic -no-reboot \
		-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet opvm.kmod=$k opvm.workload=pingpong:$ROUNDS,$REPS+cpuloop:$ITERS,$REPS+forker:$FORKS" \
		-device virtio-serial-pci \
		-chardev socket,id=ch0,path="$sock",server=on,wait=off \
		-device virtserialport,chardev=ch0,name=org.opvm.0 \
		</dev/null >"$T/console-$k.log" 2>&1 &
	QPID=$!
	python3 - "$sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
for _ in range(600):
    try:
        s.connect(sys.argv[1])
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(0)
while s.recv(65536):
    pass
PY
	RPID=$!
	for _ in $(seq 1700); do
		kill -0 "$QPID" 2>/dev/null || break
		sleep 0.1
	done
	kill "$QPID" 2>/dev/null
	wait "$QPID" 2>/dev/null
	QPID=
	kill "$RPID" 2>/dev/null
	wait "$RPID" 2>/dev/null
	RPID=
}

value() {	# value KMOD KEY -> the final (median) figure
	sed -n "s/^OPVM-BENCH $2=\([0-9.]*\).*/\1/p" "$T/console-$1.log" | tail -n 1
}

boot 0
boot 1
if grep -q "insmod opvm.ko failed" "$T/console-1.log"; then
	echo "guest-module-overhead: opvm.ko did not load in the guest" >&2
	exit 1
fi
pp0=$(value 0 "pingpong ns_per_roundtrip")
pp1=$(value 1 "pingpong ns_per_roundtrip")
cl0=$(value 0 "cpuloop ns")
cl1=$(value 1 "cpuloop ns")
fk0=$(value 0 "forker ns_per_child")
fk1=$(value 1 "forker ns_per_child")
if [ -z "$pp0" ] || [ -z "$pp1" ] || [ -z "$cl0" ] || [ -z "$cl1" ] ||
	[ -z "$fk0" ] || [ -z "$fk1" ]; then
	tail -5 "$T"/console-*.log >&2
	echo "guest-module-overhead: a workload did not report (consoles above)" >&2
	exit 1
fi
unit=ns
[ "$ICOUNT" = 1 ] && unit="icount-ns"
echo "kmod-pingpong-roundtrip-without: $pp0 $unit"
echo "kmod-pingpong-roundtrip-with: $pp1 $unit"
echo "kmod-cpuloop-without: $cl0 $unit"
echo "kmod-cpuloop-with: $cl1 $unit"
echo "kmod-fork-exec-without: $fk0 $unit"
echo "kmod-fork-exec-with: $fk1 $unit"
python3 -c "print('kmod-overhead-switch: %.2f %%' % ((float('$pp1') - float('$pp0')) / float('$pp0') * 100))"
python3 -c "print('kmod-overhead-cpu: %.3f %%' % ((float('$cl1') - float('$cl0')) / float('$cl0') * 100))"
python3 -c "print('kmod-overhead-fork: %.1f %%' % ((float('$fk1') - float('$fk0')) / float('$fk0') * 100))"
