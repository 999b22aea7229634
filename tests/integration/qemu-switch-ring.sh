#!/bin/bash
# opvm.ko's task-switch rings against its current-task slots, on a real
# guest under QEMU TCG: a pingpong storm (two processes passing a byte,
# thousands of switches a second on 2 vCPUs), read while the guest runs
# through QEMU's memory (gpa2hva + /proc/PID/mem) into the host timeline,
# and 300 gdbstub stops reading every vCPU's slot as the gdbstub sampler
# does.  The timeline must name the slot's task at the moment of the stop
# for >= 99 % of the samples (tests/tools/switch-check.c says how that
# moment is found on the guest's clock).  At 40 of the stops, guestmem's
# page-table walk must read what QEMU's own virtual reads (HMP x) read at
# vCPU 0's RIP and at the kernel's _text.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
CHECK=$BUILD/tests/tools/switch-check
[ -x "$CHECK" ] || fail "$CHECK is not built (make check builds it)"
mk_tmp qemu-switch-ring

qemu-system-x86_64 -accel tcg -m 384 -smp 2 -nodefaults -display none \
	-qmp "unix:$T/qmp,server=on,wait=off" -gdb "unix:$T/gdb,server=on,wait=off" \
	-serial "file:$T/console.log" \
	-device virtio-serial-pci,id=ser \
	-chardev "socket,id=opvm0,path=$T/chan,server=on,wait=off" \
	-device virtserialport,bus=ser.0,chardev=opvm0,name=org.opvm.0 \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.workload=pingpong opvm.args=100000,20" \
	> "$T/qemu.log" 2>&1 &
qpid=$!
CLEAN_PIDS=$qpid
wait_for "$T/console.log" "OPVM-READY kmod=1" "$qpid"
grep -aq "OPVM-READY kmod=1" "$T/console.log" || fail "the guest did not load opvm.ko"
sleep 1
timeout 180 "$CHECK" --qmp "$T/qmp" --gdb "$T/gdb" --chan "$T/chan" --pid "$qpid" \
	--samples 300 --interval-ms 20 > "$T/check.out" 2>&1
rc=$?
cat "$T/check.out"
grep -q '^RESULT switch-ring vs slot' "$T/check.out" || fail "switch-check gave no result (exit $rc)"
grep -q '^RESULT page walk' "$T/check.out" || fail "switch-check gave no page-walk result"
[ $rc = 0 ] || fail "fewer than 99 % of the samples agree, or a page walk differs from QEMU's"

echo PASS
