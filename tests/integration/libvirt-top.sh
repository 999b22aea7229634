#!/bin/bash
# opvm-test: alone (one libvirtd for the host's domains)
# opvm top against a real libvirtd: two transient SeaBIOS-only domains (no
# kernel needed: top measures, it does not profile), one under KVM with a
# disk (libvirt's block counters; its exit counters from libvirt's VM
# statistics, asserted when libvirt can start a KVM domain here), one under
# TCG with 2 vCPUs.
#  1. `opvm top --once --format json -c qemu:///system`: both domains, as
#     libvirt rows joined to their QEMU processes (pid, vCPU threads);
#  2. LIBVIRT_DEFAULT_URI is honoured (test:///default's own domain "test"
#     shows, with no local process);
#  3. the exporter's metrics carry the block counters.
. "$(dirname "$0")/qemu-common.bash"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
. "$(dirname "$0")/libvirt-common.bash"
mk_tmp_libvirt libvirt-top
T=$(realpath "$T")
A=opvm-lt-$$-a
B=opvm-lt-$$-b

stop_all() {
	$VIRSH destroy "$A" >/dev/null 2>&1
	$VIRSH destroy "$B" >/dev/null 2>&1
	stop_libvirt
}
CLEANUP_HOOK=stop_all
start_libvirt

chmod 755 "$T"
truncate -s 1M "$T/disk.img"
mkdom() {	# mkdom NAME TYPE VCPUS DISK-XML
	cat > "$T/$1.xml" <<EOF
<domain type='$2'>
  <name>$1</name>
  <memory unit='MiB'>32</memory>
  <vcpu>$3</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><boot dev='hd'/></os>
  $( [ "$2" = kvm ] && echo "<cpu mode='custom' match='exact' check='none'><model fallback='allow'>qemu64</model></cpu>" )
  <on_reboot>destroy</on_reboot>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    $4
    <memballoon model='none'/>
  </devices>
</domain>
EOF
	$VIRSH create "$T/$1.xml" > "$T/$1.create" 2>&1
}
DISK="<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='$T/disk.img'/><target dev='vda' bus='virtio'/></disk>"
atype=kvm
if ! [ -w /dev/kvm ] || ! mkdom "$A" kvm 1 "$DISK"; then
	echo "no KVM domain here ($(tr '\n' ' ' < "$T/$A.create" 2>/dev/null)); $A runs under TCG"
	atype=qemu
	mkdom "$A" qemu 1 "$DISK" || { cat "$T/$A.create"; fail "virsh create $A failed"; }
fi
mkdom "$B" qemu 2 "" || { cat "$T/$B.create"; fail "virsh create $B failed"; }
sleep 3

# ---- 1: -c URI ----------------------------------------------------------------
"$OPVM" top --once --format json -c "$URI" -f "opvm-lt-$$-" -d 2 > "$T/top.json" ||
	fail "opvm top --once -c $URI failed"
# ---- 2: LIBVIRT_DEFAULT_URI ---------------------------------------------------
LIBVIRT_DEFAULT_URI=test:///default "$OPVM" top --once --format json -f test > "$T/env.json" ||
	fail "opvm top with LIBVIRT_DEFAULT_URI=test:///default failed"
# ---- 3: exporter ----------------------------------------------------------------
"$OPVM" exporter --listen "unix:$T/exp.sock" -c "$URI" > "$T/exporter.log" 2>&1 &
CLEAN_PIDS=$!
for _ in $(seq 50); do [ -S "$T/exp.sock" ] && break; sleep 0.1; done
curl -sf --unix-socket "$T/exp.sock" http://opvm/metrics > "$T/metrics.txt" || fail "no metrics"

python3 - "$T" "$A" "$B" "$atype" <<'EOF' || exit 1
import json, sys
t, a, b, atype = sys.argv[1:5]
d = json.load(open(t + "/top.json"))
g = {x["name"]: x for x in d["guests"]}
env = json.load(open(t + "/env.json"))
metrics = open(t + "/metrics.txt").read()
for n in (a, b):
    x = g.get(n)
    if x:
        print("RESULT libvirt top: %s source=%s pid=%d accel=%s vcpus=%d tids=%s cpu%%=%.1f steal%%=%.2f "
              "exits/s=%s (%s) block r/w B/s=%s/%s"
              % (n, x["source"], x["pid"], x["accel"], x["vcpus"], [v["tid"] for v in x["vcpu"]],
                 x["cpu_pct"], x["steal_pct"], x["exits_per_s"],
                 x.get("exits_source") or x.get("exits_why"), x["block_read_bps"], x["block_write_bps"]))
print("RESULT libvirt top: LIBVIRT_DEFAULT_URI=test:///default gives %s"
      % [(x["name"], x["source"], x["pid"]) for x in env["guests"]])
ok = True
for n, nv in ((a, 1), (b, 2)):
    x = g.get(n)
    if not x or x["source"] != "libvirt" or x["pid"] <= 0:
        print("FAIL: %s is not a libvirt row joined to its QEMU process" % n); ok = False
    elif x["vcpus"] != nv or not all(v["tid"] > 0 for v in x["vcpu"]):
        print("FAIL: %s: expected %d vCPU threads" % (n, nv)); ok = False
if atype == "kvm" and a in g and not (g[a].get("exits_source") == "libvirt" and g[a]["exits_per_s"]):
    print("FAIL: no KVM exits from libvirt's VM statistics for %s" % a); ok = False
if a in g and g[a]["block_read_bps"] is None:
    print("FAIL: no block counters for %s" % a); ok = False
if not any(x["name"] == "test" and x["source"] == "libvirt" and x["pid"] == 0 for x in env["guests"]):
    print("FAIL: LIBVIRT_DEFAULT_URI was not honoured"); ok = False
if ('opvm_guest_block_read_bytes_total{guest="%s"}' % a) not in metrics:
    print("FAIL: the exporter has no block counter for %s" % a); ok = False
if "opvm_libvirt_up 1" not in metrics:
    print("FAIL: the exporter did not reach libvirt"); ok = False
sys.exit(0 if ok else 1)
EOF
echo PASS
