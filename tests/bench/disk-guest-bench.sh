#!/bin/bash
# disk-guest: the Debian disk guest `make images-disk` builds, under TCG.
#
#   disk-guest-boot: N s      power-on (QEMU started, not paused) to the
#                             first bytes of the relay's HELLO on the
#                             org.opvm.0 port: systemd, the module loaded by
#                             DKMS's build, the relay's unit
#   disk-guest-overhead: X %  a fixed workload (images/disk/opvm-wl timed
#                             mix: python3, sqlite3, xz from Debian) timed
#                             by the guest itself, with opvm.ko and the
#                             relay (the host reading the port) against a
#                             boot without them (modprobe.blacklist=opvm,
#                             the relay's unit masked)
#
# The overhead boots run with -icount shift=0 and one vCPU (as
# guest-module-overhead.sh): the guest's clock counts its instructions, not
# the host's load; BENCH_ICOUNT=0 uses real time instead (noisy on a shared
# machine).  The boot
# time is wall-clock on purpose (what a user waits), so it varies with the
# host's load: compare runs made in one sitting.  Env: BUILD.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
. tests/integration/qemu-common.bash
. tests/integration/disk-guest-common.bash
need_disk
mk_tmp disk-guest-bench
T=$(cd "$T" && pwd)
QPID=
RPID=
kill_guest() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
	[ -n "$RPID" ] && kill "$RPID" 2>/dev/null && wait "$RPID" 2>/dev/null
	QPID= RPID=
}
CLEANUP_HOOK=kill_guest

ICOUNT=${BENCH_ICOUNT:-1}
# boot NAME ACCEL APPEND [SMP]: the disk (read-only base, writes discarded) with
# the port read by a reader that writes the seconds from power-on to the
# first byte in $T/NAME.hello; console in $T/NAME.log.
boot() {
	local name=$1 accel=$2 append=$3 smp=${4:-2} sock=$T/$1.chan
	# shellcheck disable=SC2086
	qemu-system-x86_64 $accel -m 1024 -smp "$smp" -nodefaults -display none -no-reboot \
		-kernel "$DISK/vmlinuz" -initrd "$DISK/initrd.img" \
		-append "$DISK_CMDLINE $append" \
		-drive "file=$DISK/disk.img,if=virtio,format=raw,snapshot=on" \
		-serial "file:$T/$name.log" \
		-device virtio-serial-pci \
		-chardev "socket,id=ch0,path=$sock,server=on,wait=off" \
		-device virtserialport,chardev=ch0,name=org.opvm.0 \
		> "$T/$name.qemu" 2>&1 &
	QPID=$!
	python3 - "$sock" "$T/$name.hello" "$(date +%s.%N)" <<'PY' &
import socket, sys, time
sock, out, t0 = sys.argv[1], sys.argv[2], float(sys.argv[3])
s = socket.socket(socket.AF_UNIX)
for _ in range(3000):
    try:
        s.connect(sock)
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(0)
d = s.recv(65536)
if d:
    open(out, "w").write("%.1f\n" % (time.time() - t0))
while s.recv(65536):
    pass
PY
	RPID=$!
}

# wait_for NAME PATTERN SECONDS
wait_for() {
	for _ in $(seq $(( $3 * 5 ))); do
		grep -aq "$2" "$T/$1.log" 2>/dev/null && return 0
		kill -0 "$QPID" 2>/dev/null || return 1
		sleep 0.2
	done
	return 1
}

# ---- boot time ---------------------------------------------------------------
boot boot "-accel tcg" ""
for _ in $(seq 3000); do
	[ -s "$T/boot.hello" ] && break
	kill -0 "$QPID" 2>/dev/null || break
	sleep 0.2
done
[ -s "$T/boot.hello" ] || { tail -20 "$T/boot.log" >&2; echo "disk-guest-bench: no HELLO from the relay" >&2; exit 1; }
kill_guest
echo "disk-guest-boot: $(cat "$T/boot.hello") s"

# ---- overhead ------------------------------------------------------------------
timed() {	# timed NAME APPEND -> the guest's own ns for the mix
	local accel="-accel tcg"
	[ "$ICOUNT" = 1 ] && accel="$accel -icount shift=0"
	boot "$1" "$accel" "opvm.workload=timed-mix $2" 1
	wait_for "$1" "OPVM-TIMED mix" 3000 ||
		{ tail -20 "$T/$1.log" >&2; echo "disk-guest-bench: $1: no OPVM-TIMED" >&2; exit 1; }
	kill_guest
	grep -a "OPVM-TIMED mix" "$T/$1.log" | tail -n 1
}
without=$(timed without "modprobe.blacklist=opvm systemd.mask=opvm-relay.service") || exit 1
with=$(timed with "") || exit 1
echo "$without" | grep -q "kmod=0" || { echo "disk-guest-bench: opvm.ko loaded in the boot without it: $without" >&2; exit 1; }
echo "$with" | grep -q "kmod=1" || { echo "disk-guest-bench: opvm.ko not loaded: $with" >&2; exit 1; }
n0=$(echo "$without" | awk '{print $3}')
n1=$(echo "$with" | awk '{print $3}')
unit=ns
[ "$ICOUNT" = 1 ] && unit=icount-ns
echo "disk-guest-mix-without: $n0 $unit"
echo "disk-guest-mix-with: $n1 $unit"
python3 -c "print('disk-guest-overhead: %.2f %%' % ((int('$n1') - int('$n0')) * 100.0 / int('$n0')))"
