#!/bin/bash
# The perf sampler never stops, pauses or resumes a guest: 50 rounds of
# `opvm attach --qmp` (sampler perf, chosen because query-kvm says KVM)
# against a QEMU/KVM guest (the synthetic guest under -M microvm: its vCPU
# runs), each with a stop/cont storm from a second QMP client while opvm
# samples; the storm ends with a cont, opvm detaches (--duration), and
# query-status must say the guest runs: 50 of 50.  During every round `info
# chardev` must show no gdbstub, and no round's summary may say gdbstub.
# Bounded: about 1.5 s a round.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
ROUNDS=${ROUNDS:-50}
T=$BUILD/tmp/kvm-perf-storm.$$
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

# The guest waits for a byte on its console before its workload: it runs
# (in its kernel's wait loop) all along, which is all this test needs.
qemu-system-x86_64 -M microvm -accel kvm -cpu qemu64 -m 64 -display none -no-reboot \
	-kernel "$G/guest-mb.elf" -serial "file:$T/console.log" \
	-qmp "unix:$T/qmp,server=on,wait=off" -qmp "unix:$T/ctl,server=on,wait=off" \
	>"$T/qemu.log" 2>&1 &
QEMU=$!
for _ in $(seq 100); do
	grep -q "waiting for a byte" "$T/console.log" 2>/dev/null && break
	sleep 0.1
done
grep -q "waiting for a byte" "$T/console.log" 2>/dev/null ||
	{ echo "FAIL: the guest did not boot under QEMU/KVM"; cat "$T/qemu.log" "$T/console.log"; exit 1; }

timeout 300 python3 - "$T" "$OPVM" "$ROUNDS" <<'PYEOF'
import json, os, random, socket, subprocess, sys, time
T, OPVM, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
random.seed(int(os.environ.get("STORM_SEED", str(os.getpid()))))

class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        self.f.readline()
        self.run("qmp_capabilities")
    def run(self, cmd, args=None):
        m = {"execute": cmd}
        if args:
            m["arguments"] = args
        self.f.write(json.dumps(m) + "\n"); self.f.flush()
        while True:
            r = json.loads(self.f.readline())
            if "event" not in r:
                if "error" in r:
                    raise RuntimeError("%s: %s" % (cmd, r["error"]))
                return r["return"]

ctl = Qmp(T + "/ctl")
if not ctl.run("query-status")["running"]:
    print("FAIL: the guest is not running before the first round"); sys.exit(1)
running_after, stops, gdb_seen, fails = 0, 0, 0, []
for rnd in range(ROUNDS):
    out = "%s/attach%d.out" % (T, rnd)
    p = subprocess.Popen([OPVM, "attach", "--qmp", T + "/qmp", "--name", "vm",
                          "--duration", "1", "-d", "%s/s%d" % (T, rnd)],
                         stdout=open(out, "w"), stderr=subprocess.STDOUT)
    tree, limit = "%s/s%d/guests/vm" % (T, rnd), time.time() + 30
    while not os.path.isdir(tree) and p.poll() is None and time.time() < limit:
        time.sleep(0.01)
    chardevs = ctl.run("human-monitor-command", {"command-line": "info chardev"})
    if "gdb" in chardevs:
        gdb_seen += 1
    paused, end = False, time.time() + 0.6
    while time.time() < end and p.poll() is None:
        ctl.run("cont" if paused else "stop")
        paused = not paused
        stops += paused
        time.sleep(random.uniform(0, 0.03))
    if paused:
        ctl.run("cont")
    rc = p.wait()
    text = open(out).read()
    if rc != 0 or "sampler perf" not in text or "gdbstub" in text:
        fails.append("round %d: attach rc %d, summary:\n%s" % (rnd, rc, text))
    time.sleep(0.05)
    if ctl.run("query-status")["running"]:
        running_after += 1
    else:
        fails.append("round %d: the guest is not running after the attach" % rnd)
        ctl.run("cont")
print("RESULT kvm-perf-storm: guest running after %d of %d rounds; %d stops by the "
      "storm; gdbstub chardev seen in %d rounds" % (running_after, ROUNDS, stops, gdb_seen))
if gdb_seen:
    fails.append("info chardev showed a gdbstub in %d rounds" % gdb_seen)
for f in fails[:5]:
    print("FAIL:", f)
sys.exit(1 if fails or running_after != ROUNDS else 0)
PYEOF
rc=$?
[ $rc -eq 124 ] && echo "FAIL: the storm did not finish in 300 s"
exit $rc
