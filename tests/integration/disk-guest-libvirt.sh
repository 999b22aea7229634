#!/bin/bash
# A real guest, run as users run it: the Debian 12 disk `make images-disk`
# builds (systemd, Debian's kernel from its own /boot, opvm.ko built by DKMS
# from the guest package, the relay's unit enabled by it) as a libvirt
# domain (TCG) with the org.opvm.0 channel, busy with Debian's own xz,
# sqlite3 and python3.  One boot serves three checks:
#
#  1. disk-guest-libvirt: `opvm attach DOMAIN -g --call-graph dwarf
#     --duration 20`, empty build-id cache, no symbol flags: the workload
#     processes' user samples named by binary (>= 99 %) and by symbol (>= 40 %:
#     what Debian's stripped binaries allow, disk-guest-check.py), kernel
#     samples named (>= 99 %, firmware/boot apart), the workload's user
#     stacks reaching main (>= 90 %: a frame in main, or below it in libc's
#     start code; main of Debian's stripped xz and sqlite3 is found from
#     their _start), kernel stacks present;
#  2. disk-guest-vs-perf: a second session (the cache filled: the guest is
#     not busy sending binaries) of 20 s inside a window of `perf record -e
#     cpu-clock -a --call-graph dwarf` in the guest (images/disk/opvm-wl
#     perf), which started first: processes with >= 5 % of samples within
#     2 pp, the top-10 symbols within 2 pp, the caller split of the top
#     symbol within 3 pp (or 3 sigma of the two binomial estimates, when
#     the samples are too few for the pp bound); both tables printed.
#     Like with like: opvm's samples in hard interrupt handlers are left
#     out (perf's cpu-clock cannot sample there), perf's PLT stubs count as
#     their binary's unnamed code (opvm does not name them); the check
#     prints both counts (disk-guest-check.py);
#  3. disk-guest-package: DKMS built the module, the relay is active;
#     `dpkg -P opvm-guest` removes module, DKMS tree and unit; reinstalled,
#     a reboot brings the module and the relay back.
# Starts virtlogd/libvirtd if none runs (libvirt-common.bash).
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/libvirt-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
command -v qemu-img >/dev/null 2>&1 || skip "qemu-img is not installed (qemu-utils)"
mk_tmp_libvirt disk-guest
T=$(realpath "$T")
D=opvm-disk-$$
CON=$T/con
stop_all() {
	$VIRSH destroy "$D" >/dev/null 2>&1
	stop_libvirt
}
CLEANUP_HOOK=stop_all
start_libvirt

# QEMU runs as libvirt-qemu: the domain's files in a directory it may
# enter; the shared image is the read-only base of a private overlay.
chmod 755 "$T"
cp "$DISK/vmlinuz" "$DISK/initrd.img" "$T/"
base=$(realpath "$DISK/disk.img")
qemu-img create -q -f qcow2 -b "$base" -F raw "$T/disk.qcow2" || fail "qemu-img create"
cat > "$T/$D.xml" <<EOF
<domain type='qemu'>
  <name>$D</name>
  <memory unit='MiB'>1536</memory>
  <vcpu>2</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$T/vmlinuz</kernel>
    <initrd>$T/initrd.img</initrd>
    <cmdline>$DISK_CMDLINE</cmdline>
  </os>
  <features><acpi/></features>
  <on_reboot>restart</on_reboot>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='$T/disk.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <serial type='unix'>
      <source mode='bind' path='$CON'/>
      <log file='$T/console.log'/>
    </serial>
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.opvm.0'/>
    </channel>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
t0=$(date +%s)
$VIRSH create "$T/$D.xml" || fail "virsh create $D failed"
wait_shell 600 || { tail -30 "$T/console.log"; fail "no root shell on the console of $D"; }
echo "MEASURED disk guest: booted to its shell in $(( $(date +%s) - t0 )) s"

# ---- 3a: the package as installed in the image --------------------------------
pkg_state() {
	gsh 120 'echo "relay=$(systemctl is-active opvm-relay) enabled=$(systemctl is-enabled opvm-relay 2>/dev/null)"; echo "loaded=$(grep -c "^opvm " /proc/modules)"; echo "ko=$(ls /lib/modules/$(uname -r)/updates/dkms/ 2>/dev/null | tr "\n" " ")"; echo "dkms=$(dkms status opvm 2>/dev/null | tr "\n" " ")"'
}
# The relay may still be starting when the shell answers.
for _ in $(seq 60); do
	st=$(pkg_state) || fail "the guest's shell failed: $st"
	echo "$st" | grep -q "relay=active" && break
	sleep 2
done
echo "$st"
echo "$st" | grep -q "relay=active enabled=enabled" || fail "opvm-relay is not active and enabled at boot"
echo "$st" | grep -q "loaded=1" || fail "opvm.ko is not loaded"
echo "$st" | grep -q "ko=opvm.ko" || fail "DKMS installed no opvm.ko for the guest's kernel"
echo "$st" | grep -q "dkms=opvm/.*installed" || fail "dkms status does not show opvm installed"
echo "RESULT disk-guest-package: DKMS built opvm.ko, the relay is active at boot"

# ---- 1 and 2: opvm outside, perf inside -----------------------------------------
gsh 60 opvm-wl start | grep -q "OPVM-WL started" || fail "the workloads did not start"
sleep 5
mkdir -p "$T/cache"

# attach_bg NAME: opvm attach -g --call-graph dwarf for 20 s into $T/NAME,
# in the background ($apid); returns once opvm's gdbstub is up (sampling).
attach_bg() {
	XDG_CACHE_HOME=$T/cache "$OPVM" attach "$D" -g --call-graph dwarf -F 100 --duration 20 \
		-d "$T/$1" > "$T/$1.out" 2>&1 &
	apid=$!
	CLEAN_PIDS="$apid"
	for _ in $(seq 240); do
		kill -0 "$apid" 2>/dev/null || break
		$VIRSH qemu-monitor-command "$D" --hmp "info chardev" 2>/dev/null |
			grep -q "^opvm-gdb: " && break
		sleep 0.25
	done
	kill -0 "$apid" 2>/dev/null || { cat "$T/$1.out"; fail "opvm attach $D exited before sampling"; }
}
# reports NAME: the session's report -l and stack JSON.
reports() {
	wait "$apid" || { cat "$T/$1.out"; fail "opvm attach $D failed"; }
	CLEAN_PIDS=""
	cat "$T/$1.out"
	# opvm stops the guest at each sample: it must leave it running.
	st=$($VIRSH domstate "$D" --reason 2>&1)
	case "$st" in
	running*) ;;
	*) fail "opvm attach left $D $st (not running) after its session" ;;
	esac
	"$OPVM" report -d "$T/$1" --format json > "$T/$1-stacks.json" 2>"$T/report.err" ||
		{ cat "$T/report.err"; fail "opvm report --format json"; }
	"$OPVM" report -l -d "$T/$1" --format json > "$T/$1-symbols.json" 2>>"$T/report.err" ||
		{ cat "$T/report.err"; fail "opvm report -l --format json"; }
}
CHECK="python3 $(dirname "$0")/disk-guest-check.py"
# Checked now, failed at the end: the package checks still run.
check_rc=0

# 1: the first session with an empty build-id cache, no symbol flags.
attach_bg first
reports first
# The workloads' executables, read from the image (debugfs, e2fsprogs): in
# Debian's stripped xz and sqlite3, main has no name; the check finds it
# from their _start.
mkdir -p "$T/bin"
for b in xz sqlite3 python3.11; do
	debugfs -R "dump /usr/bin/$b $T/bin/$b" "$base" > /dev/null 2>&1 ||
		fail "debugfs could not read /usr/bin/$b from $base"
done
$CHECK first "$T/first-symbols.json" "$T/first-stacks.json" "$T/bin" || check_rc=1

# 2: a second session (the binaries are in the cache now: the guest is not
# busy sending them) inside a window of perf in the guest.  perf starts
# first: its own start (it reads /proc/kallsyms and every process's maps,
# seconds of CPU under TCG) is outside both windows.  Once its counters
# are on (OPVM-PERF-ENABLED on the console), opvm samples 20 s, which end
# before perf's PERF_SECS do (checked); perf's window also holds steady
# work only around opvm's, so the two shares describe the same work.
# perf unwinds user stacks by DWARF (dwarf,4096): with -g alone it walks
# frame pointers, which Debian's binaries do not keep, and names no caller.
PERF_SECS=30
gsh 1200 opvm-wl perf $PERF_SECS dwarf,4096 > "$T/perf.out" &
gpid=$!
for _ in $(seq 600); do
	grep -aq "OPVM-PERF-ENABLED" "$T/console.log" && break
	kill -0 "$gpid" 2>/dev/null || break
	sleep 0.1
done
grep -aq "OPVM-PERF-ENABLED" "$T/console.log" || { tail -20 "$T/perf.out"; fail "perf in the guest did not start"; }
attach_bg second
reports second
# perf still recording: its window holds opvm's.
kill -0 "$gpid" 2>/dev/null && ! grep -aq "OPVM-PERF recorded" "$T/console.log" ||
	fail "perf's $PERF_SECS s ended before opvm's 20 s: the windows do not nest (a slow attach?)"
wait "$gpid" || { tail -20 "$T/perf.out"; fail "perf in the guest failed"; }
grep -a "^OPVM-PERF-JSON " "$T/perf.out" | tail -n 1 | cut -d' ' -f2- > "$T/perf.json"
[ -s "$T/perf.json" ] || { cat "$T/perf.out"; fail "no OPVM-PERF-JSON from the guest"; }
$CHECK vs-perf "$T/second-symbols.json" "$T/second-stacks.json" "$T/perf.json" || check_rc=1
gsh 60 opvm-wl stop > /dev/null

# ---- 3b: purge, reinstall, reboot ---------------------------------------------
gsh 900 'dpkg -P opvm-guest >/tmp/purge.log 2>&1; echo "purge=$?"' > "$T/purge.out" ||
	{ cat "$T/purge.out"; fail "dpkg -P opvm-guest"; }
st=$(pkg_state)
echo "after dpkg -P: $st" | tr '\n' ' '; echo
echo "$st" | grep -q "relay=inactive" || fail "the relay still runs after dpkg -P"
echo "$st" | grep -q "enabled= *$" || echo "$st" | grep -q "enabled=disabled" ||
	echo "$st" | grep -Eq "enabled=(not-found)?$" || fail "the relay's unit is still there after dpkg -P"
echo "$st" | grep -q "loaded=0" || fail "opvm.ko is still loaded after dpkg -P"
echo "$st" | grep -q "ko= *$" || fail "opvm.ko is still under updates/dkms after dpkg -P"
gsh 60 'ls -d /var/lib/dkms/opvm /usr/src/opvm-* /lib/systemd/system/opvm-relay.service /usr/sbin/opvm-relay 2>/dev/null | wc -l' |
	grep -qx 0 || fail "dpkg -P left opvm files behind"
echo "RESULT disk-guest-package: dpkg -P removed the module, its DKMS tree and the relay's unit"
# DKMS compiles opvm.ko again, in the guest (under TCG: minutes).
gsh 1800 'dpkg -i /var/cache/opvm-guest.deb >/tmp/install.log 2>&1; echo "install=$?"' | grep -q "install=0" ||
	fail "dpkg -i opvm-guest (reinstall) failed"
t1=$(date +%s)
boot_id=$(gsh 60 cat /proc/sys/kernel/random/boot_id | grep -Eo '[0-9a-f-]{36}' | tail -n 1)
[ -n "$boot_id" ] || fail "no boot_id from the guest"
gsh 10 'systemctl reboot' > /dev/null 2>&1
# Until a shell of the next boot answers (the old one may, while it stops).
for _ in $(seq 120); do
	sleep 5
	wait_shell 600 || { tail -30 "$T/console.log"; fail "the guest did not come back from its reboot"; }
	id=$(gsh 60 cat /proc/sys/kernel/random/boot_id | grep -Eo '[0-9a-f-]{36}' | tail -n 1)
	[ -n "$id" ] && [ "$id" != "$boot_id" ] && break
done
[ "$id" != "$boot_id" ] || fail "the guest did not reboot"
for _ in $(seq 60); do
	st=$(pkg_state)
	echo "$st" | grep -q "relay=active" && break
	sleep 2
done
echo "after reinstall and reboot ($(( $(date +%s) - t1 )) s): $st" | tr '\n' ' '; echo
echo "$st" | grep -q "relay=active enabled=enabled" || fail "the relay is not back after the reboot"
echo "$st" | grep -q "loaded=1" || fail "opvm.ko is not loaded after the reboot"
echo "RESULT disk-guest-package: reinstalled, a reboot brought opvm.ko and the relay back"
[ "$check_rc" = 0 ] || fail "opvm's profile of the disk guest: see the FAIL lines above"
exit 0
