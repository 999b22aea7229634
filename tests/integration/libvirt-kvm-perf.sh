#!/bin/bash
# opvm-test: alone (one libvirtd for the host's domains)
# The perf backend on a real libvirt domain of type kvm: libvirtd runs the
# synthetic guest (guest-mb.elf, multiboot under -M pc; two processes on the
# same ring-3 addresses in two address spaces, writing opvm.ko's task-switch
# ring) with its opvm port on COM2, a unix socket given to `opvm attach
# DOMAIN --channel`.  opvm finds the vCPU thread and guest RAM (gpa2hva)
# through libvirt's monitor passthrough, never stopping the guest, and names
# each sample's task from the switch ring.  Asserted by kvm-perf-check.py:
# the A:B split within 2 pp of the guest's truth, >= 99.5 % of user samples
# in the right address space, host-mode samples 0; and here: the guest was
# never paused, and no gdbstub chardev was opened.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
. "$(dirname "$0")/libvirt-common.bash"
[ -e /dev/kvm ] || skip "no /dev/kvm on this host"
G=$BUILD/tests/guests
if [ ! -f "$G/guest-mb.elf" ]; then
	make -s guests BUILD="$BUILD" >/dev/null || fail "cannot build the guests"
fi
mk_tmp_libvirt libvirt-kvm-perf
D=opvm-kvm-perf-$$
CLEANUP_HOOK=stop_all
stop_all() {
	$VIRSH destroy "$D" >/dev/null 2>&1
	stop_libvirt
}
start_libvirt

# QEMU runs as libvirt-qemu: a private copy of the guest, in a directory
# it may enter.
chmod 755 "$T"
cp "$G/guest-mb.elf" "$T/"
R=$(realpath "$T")
cat > "$T/dom.xml" <<XML
<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$D</name>
  <memory unit='MiB'>64</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$R/guest-mb.elf</kernel>
  </os>
  <cpu mode='custom' match='exact' check='none'><model fallback='allow'>qemu64</model></cpu>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <serial type='unix'><source mode='bind' path='$R/con'/><target port='0'/></serial>
    <serial type='unix'><source mode='bind' path='$R/chan'/><target port='1'/></serial>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-device'/>
    <qemu:arg value='isa-debug-exit,iobase=0x501,iosize=1'/>
  </qemu:commandline>
</domain>
XML
$VIRSH create "$T/dom.xml" >/dev/null || fail "virsh create of a kvm domain failed"

# The console: wait for the guest (SeaBIOS takes up to 25 s on this nested
# KVM), attach, list the chardevs while opvm samples, let the guest go.
printf '%s\n' virsh -q -c "$URI" qemu-monitor-command "$D" --hmp "info chardev" \
	>"$T/chardev.cmd"
timeout 400 python3 "$(dirname "$0")/synth-console.py" "$T" 120 "$T/s/guests/$D" -- \
	"$OPVM" attach "$D" --channel "$T/chan" -d "$T/s" --separate thread -F 4000 \
	--duration 240 || fail "the guest or opvm attach failed"

grep -q gdb "$T/chardev.txt" && fail "a gdbstub chardev was open during perf sampling: $(cat "$T/chardev.txt")"
grep -q "sampler perf" "$T/attach.out" || fail "attach did not pick the perf sampler for a kvm domain"
grep -q "the guest was never stopped" "$T/attach.out" || fail "the summary does not say the guest was never stopped"
[ "$($VIRSH domstate "$D" 2>/dev/null)" != paused ] || fail "the domain is paused"
"$OPVM" report --session-dir "$T/s" --separate thread -l --format json \
	--guest-root "$G" >"$T/report.json" 2>"$T/report.err" ||
	fail "opvm report: $(cat "$T/report.err")"
python3 "$(dirname "$0")/kvm-perf-check.py" libvirt-kvm-perf "$T/report.json" \
	"$T/console.log" "$T/attach.out" || exit 1
exit 0
