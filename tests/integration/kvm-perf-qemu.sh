#!/bin/bash
# The perf sampler backend on a QEMU/KVM guest: qemu-system-x86_64 -accel
# kvm -cpu qemu64 runs the synthetic guest (guest-mb.elf, booted by its PVH
# entry under -M microvm: SeaBIOS takes ~25 s on this nested KVM; the same
# image also boots by multiboot under -M pc), with its opvm channel on an
# ISA serial port (COM2) on a unix socket.  `opvm attach --qmp --channel`
# picks the perf sampler itself (query-kvm), finds the vCPU thread through
# query-cpus-fast and guest RAM through gpa2hva, learns the switch ring from
# the guest's HELLO, and samples with host perf until the guest powers off.
# Asserted, against the guest's own truth (the work each process did):
#   - the A:B split of user samples within 2 percentage points;
#   - >= 99.5 % of user samples in the right address space (func_a only in
#     process 1, func_b only in process 2) and >= 90 % named by the ring;
#   - host-mode samples filed: 0; the summary says sampler perf.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/kvm-perf-qemu.$$
QEMU=
cleanup() {
	[ -n "$QEMU" ] && kill "$QEMU" 2>/dev/null && wait "$QEMU" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T"

[ -e /dev/kvm ] || { echo "SKIP: no /dev/kvm on this host"; exit 77; }
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: qemu-system-x86_64 is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed"; exit 77; }
if [ ! -f "$G/guest-mb.elf" ]; then
	make -s guests BUILD="$BUILD" >/dev/null || { echo "FAIL: cannot build the guests"; exit 1; }
fi

qemu-system-x86_64 -M microvm -accel kvm -cpu qemu64 -m 64 -display none -no-reboot \
	-kernel "$G/guest-mb.elf" \
	-chardev "socket,id=con,path=$T/con,server=on,wait=on" -serial chardev:con \
	-chardev "socket,id=ch,path=$T/chan,server=on,wait=off" \
	-device isa-serial,chardev=ch,iobase=0x2f8,irq=3 \
	-device isa-debug-exit,iobase=0x501,iosize=1 \
	-qmp "unix:$T/qmp,server=on,wait=off" >"$T/qemu.log" 2>&1 &
QEMU=$!

# The console: wait for the guest, start opvm, then let the guest go.
timeout 300 python3 "$(dirname "$0")/synth-console.py" "$T" 30 "$T/s/guests/vm" -- \
	"$OPVM" attach --qmp "$T/qmp" --channel "$T/chan" --name vm -d "$T/s" \
	--separate thread -F 4000 || { cat "$T/qemu.log"; exit 1; }

"$OPVM" report --session-dir "$T/s" --separate thread -l --format json \
	--guest-root "$G" >"$T/report.json" 2>"$T/report.err" ||
	{ echo "FAIL: opvm report"; cat "$T/report.err"; exit 1; }
python3 "$(dirname "$0")/kvm-perf-check.py" kvm-perf-qemu "$T/report.json" "$T/console.log" "$T/attach.out" || exit 1
exit 0
