#!/bin/bash
# opvm-test: alone (one libvirtd for the host's domains)
# opvm attach against a real libvirtd: two transient TCG domains of the test
# image running abratio, with the org.opvm.0 channel (socket path chosen by
# libvirt, found by opvm in the live XML).
#  1. `opvm attach A --duration 5` files A's processes by name;
#  1b. by ID with $LIBVIRT_DEFAULT_URI and by UUID with -c, as virsh takes
#     them, each filed under the domain's name (the UUID one with --qemu-pid
#     B's QEMU, as opvm exporter attaches); an unknown domain's error names
#     the URI; --qemu-pid B's QEMU for domain A is refused (exit status 3):
#     A's vCPU threads are not that process's;
#  2. `opvm attach --all --duration 5` gives one tree per domain.
# Starts virtlogd/libvirtd if none runs (libvirt-common.bash).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
. "$(dirname "$0")/libvirt-common.bash"
mk_tmp_libvirt libvirt-attach
A=opvm-test-a-$$
B=opvm-test-b-$$

stop_all() {
	$VIRSH destroy "$A" >/dev/null 2>&1
	$VIRSH destroy "$B" >/dev/null 2>&1
	stop_libvirt
}
CLEANUP_HOOK=stop_all
start_libvirt

# QEMU runs as libvirt-qemu and libvirt relabels the files it is given:
# hand it private copies, in a directory it may enter.
chmod 755 "$T"
cp "$IMG/vmlinuz" "$IMG/initramfs.cpio.gz" "$T/"
mkdom() {	# mkdom NAME VCPUS
	cat > "$T/$1.xml" <<EOF
<domain type='qemu'>
  <name>$1</name>
  <memory unit='MiB'>384</memory>
  <vcpu>$2</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$(realpath "$T")/vmlinuz</kernel>
    <initrd>$(realpath "$T")/initramfs.cpio.gz</initrd>
    <cmdline>console=ttyS0 quiet opvm.workload=abratio opvm.args=150</cmdline>
  </os>
  <features><acpi/></features>
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <serial type='file'><source path='$(realpath "$T")/$1.console'/></serial>
    <channel type='unix'>
      <source mode='bind'/>
      <target type='virtio' name='org.opvm.0'/>
    </channel>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
	$VIRSH create "$T/$1.xml" || fail "virsh create $1 failed"
}
t_create=$(date +%s)
mkdom "$A" 2
mkdom "$B" 1
t0=$(date +%s)
echo "MEASURED libvirt: virsh create of two domains took $((t0 - t_create)) s"

# The guest module's HELLO waits in the guest until a host connects to the
# channel, so attaching once the workload runs still sees it.
for _ in $(seq 180); do
	grep -q "OPVM-TRUTH abratio share" "$T/$A.console" 2>/dev/null &&
		grep -q "OPVM-TRUTH abratio share" "$T/$B.console" 2>/dev/null && break
	sleep 1
done
echo "MEASURED libvirt: both domains booted to their workload in $(( $(date +%s) - t0 )) s"
grep -q "OPVM-TRUTH abratio share" "$T/$A.console" || fail "domain $A did not start its workload"
grep -q "OPVM-TRUTH abratio share" "$T/$B.console" || fail "domain $B did not start its workload"

# ---- 1: one domain by name ----------------------------------------------------
"$OPVM" attach "$A" --duration 8 -d "$T/one" > "$T/one.out" 2>&1 &
apid=$!
CLEAN_PIDS="$apid"
# Sampling has begun once opvm's gdbstub chardev is there (over 15 s on a
# host under two busy loops), and then at least 1 s more: not a fixed
# sleep; the wait ends early if opvm ends.
for _ in $(seq 240); do
	kill -0 "$apid" 2>/dev/null || break
	$VIRSH qemu-monitor-command "$A" --hmp "info chardev" 2>/dev/null |
		grep -q "^opvm-gdb: " && break
	sleep 0.5
done
sleep 1
# While sampling: no TCP listener by QEMU (it runs as libvirt-qemu) or opvm,
# and the gdbstub is on opvm's socket pair.
qpid=$(cat "/run/libvirt/qemu/$A.pid" 2>/dev/null)
if ! kill -0 "$apid" 2>/dev/null; then
	wait "$apid"; rc=$?
	cat "$T/one.out"
	fail "opvm attach $A exited (rc $rc) early in an 8 s session"
fi
kill -0 "$qpid" 2>/dev/null || {
	tail -n 20 "/var/log/libvirt/qemu/$A.log" 2>/dev/null; cat "$T/one.out"
	fail "QEMU of $A (pid '$qpid') is gone while opvm samples it"
}
no_tcp_listener "$qpid" "$apid"
$VIRSH qemu-monitor-command "$A" --hmp "info chardev" | grep -q "^opvm-gdb: " ||
	fail "no opvm-gdb chardev in $A while opvm samples"
wait "$apid" || {
	cat "$T/one.out"
	fail "opvm attach $A failed"
}
CLEAN_PIDS=""
cat "$T/one.out"
grep -q "mode gdbstub-timer" "$T/one.out" || fail "the summary does not say how samples were taken"
report_json "$T/one" > "$T/one.json" || fail "opvm report failed"
python3 - "$T/one.json" "$A" <<'EOF' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
guests = sorted({r["guest"] for r in d["symbols"]})
ab = sum(r["samples"] for r in d["symbols"] if r["app"].endswith("/abratio"))
tot = sum(r["samples"] for r in d["symbols"])
print("RESULT libvirt attach %s: guests %s, %d samples, %d in /usr/bin/abratio"
      % (sys.argv[2], guests, tot, ab))
# (5: the claim is that abratio is named under the domain; a busy host's
# gdbstub round trip, ~100 times an idle one's, takes a third or less)
if guests != [sys.argv[2]] or ab < 5:
    print("FAIL: expected the domain's abratio process by name"); sys.exit(1)
EOF
# Monitor left as found: no gdbstub listening any more.
$VIRSH qemu-monitor-command "$A" --hmp "info chardev" | grep -q "gdb: " &&
	fail "the gdbstub opvm started in $A is still there"

# ---- 1b: as virsh names domains and URIs ------------------------------------
# A by ID through $LIBVIRT_DEFAULT_URI, B by UUID through -c: both filed
# under their names.  An unknown domain names the URI that was asked.
id_a=$($VIRSH domid "$A") && uuid_b=$($VIRSH domuuid "$B") || fail "virsh domid/domuuid"
# B's QEMU process: the one its first vCPU thread belongs to
pid_b=$($VIRSH qemu-monitor-command "$B" '{"execute":"query-cpus-fast"}' | python3 -c '
import json, sys
tid = json.load(sys.stdin)["return"][0]["thread-id"]
print([l.split()[1] for l in open("/proc/%d/status" % tid) if l.startswith("Tgid:")][0])')
[ -n "$pid_b" ] || fail "cannot find domain $B's QEMU process"
LIBVIRT_DEFAULT_URI=$URI timeout 60 "$OPVM" attach "$id_a" --duration 2 -d "$T/byid" \
	> "$T/byid.out" 2>&1 || { cat "$T/byid.out"; fail "opvm attach $id_a (ID, \$LIBVIRT_DEFAULT_URI) failed"; }
timeout 30 "$OPVM" attach -c "$URI" "$A" --qemu-pid "$pid_b" --duration 1 -d "$T/notb" \
	> "$T/notb.out" 2>&1
rc=$?
echo "RESULT attach $A --qemu-pid (B's QEMU $pid_b): exit $rc: $(grep -m1 refused "$T/notb.out")"
[ "$rc" = 3 ] && grep -q "not a thread of QEMU process $pid_b" "$T/notb.out" ||
	{ cat "$T/notb.out"; fail "domain A with --qemu-pid of B's QEMU was not refused"; }
timeout 60 "$OPVM" attach -c "$URI" "$uuid_b" --qemu-pid "$pid_b" --duration 2 -d "$T/byuuid" \
	> "$T/byuuid.out" 2>&1 || { cat "$T/byuuid.out"; fail "opvm attach -c $URI $uuid_b (UUID) failed"; }
[ -d "$T/byid/guests/$A/samples/current" ] || fail "attach by ID $id_a did not file $A by name: $(ls "$T/byid/guests")"
[ -d "$T/byuuid/guests/$B/samples/current" ] || fail "attach by UUID did not file $B by name: $(ls "$T/byuuid/guests")"
echo "RESULT libvirt attach by ID $id_a (LIBVIRT_DEFAULT_URI) -> $(ls "$T/byid/guests"), by UUID $uuid_b (-c) -> $(ls "$T/byuuid/guests")"
LIBVIRT_DEFAULT_URI=test:///default timeout 30 "$OPVM" attach "$A" --duration 1 -d "$T/none" \
	> "$T/none.out" 2>&1 && fail "attach to $A at test:///default succeeded"
tr '\n' ' ' < "$T/none.out" | tr -s ' ' | grep -q "no libvirt domain '$A'.*test:///default" ||
	{ cat "$T/none.out"; fail "the error does not name the domain and \$LIBVIRT_DEFAULT_URI's URI"; }
echo "RESULT unknown domain: $(grep -m1 "no libvirt domain" "$T/none.out")"

# ---- 1c: call graphs through libvirt ---------------------------------------
# -g reads the domain's RAM through libvirt's monitor (gpa2hva) and the QEMU
# process's /proc/PID/mem: stacks of several frames, kernel ones by ORC.
# Sessions of 3 s added up (--append-samples) until 10 stacks are in, at
# most 10 of them: a loaded host gives a session of 3 s only a few samples
# (2 once), and the count, not the host's speed, is what is judged.
for round in 1 2 3 4 5 6 7 8 9 10; do
	timeout 60 "$OPVM" attach "$A" -g --system-map "$IMG/System.map" --duration 3 \
		-d "$T/cg" $([ $round = 1 ] || echo --append-samples) > "$T/cg.out" 2>&1 ||
		{ cat "$T/cg.out"; fail "opvm attach $A -g failed"; }
	report_json "$T/cg" > "$T/cg.json" || fail "opvm report of the -g session failed"
	python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("stack_samples", 0) < 10)' \
		"$T/cg.json" && break
done
python3 - "$T/cg.json" "$round" <<'EOF' || { cat "$T/cg.out"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
st = d.get("stacks", [])
deep = sum(s["samples"] for s in st if len(s["frames"]) >= 3)
tot = d.get("stack_samples", 0)
print("RESULT libvirt attach -g: %d samples in %d stacks, %d with 3+ frames (%s session(s) of 3 s)"
      % (tot, len(st), deep, sys.argv[2]))
if tot < 10 or deep * 5 < tot:
    print("FAIL: expected stacks of several frames"); sys.exit(1)
EOF

# ---- 2: --all ---------------------------------------------------------------
"$OPVM" attach --all --duration 5 -d "$T/all" > "$T/all.out" 2>&1 || {
	cat "$T/all.out"
	fail "opvm attach --all failed"
}
cat "$T/all.out"
n=$(ls "$T/all/guests" | wc -l)
echo "RESULT libvirt attach --all: $n trees: $(ls "$T/all/guests" | tr '\n' ' ')"
[ -d "$T/all/guests/$A/samples/current" ] && [ -d "$T/all/guests/$B/samples/current" ] ||
	fail "expected one sample tree per domain"
report_json "$T/all" > "$T/all.json" || fail "opvm report failed"
python3 - "$T/all.json" "$B" <<'EOF' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
per = {}
for r in d["symbols"]:
    per[r["guest"]] = per.get(r["guest"], 0) + r["samples"]
b = sum(r["samples"] for r in d["symbols"] if r["guest"] == sys.argv[2] and r["app"].endswith("/abratio"))
print("RESULT libvirt attach --all: samples per guest %s; %s's abratio %d" % (per, sys.argv[2], b))
# Each domain sampled, its workload named.  Not a rate: on a loaded
# 2-core host a 1-vCPU TCG guest once took 300 ms to answer each stop and
# gave 2 samples in 5 s (the rate cap then skips ticks, as it should).
if len(per) < 2 or min(per.values()) < 2 or b < 1:
    print("FAIL: a domain of --all was not sampled, or its abratio not named"); sys.exit(1)
EOF
echo PASS
