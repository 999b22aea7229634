#!/bin/bash
# A guest is never left paused by opvm: 50 rounds of `opvm attach --qmp`
# against a guest under CPU load (abratio in the guest, a busy loop on the
# host), each with a pause/resume storm from a second QMP client (stop and
# cont at random intervals of 0-40 ms) while opvm samples.  Each round the
# storm ends with a cont, then opvm detaches (SIGINT, SIGTERM or
# --duration, in turn, at a random moment just after), and query-status
# must say the guest runs.  Bounded: about 2 s a round.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-pause-storm
ROUNDS=${ROUNDS:-50}

qemu-system-x86_64 -accel tcg -m 384 -smp 2 -nodefaults -display none \
	-qmp "unix:$T/qmp,server=on,wait=off" -qmp "unix:$T/ctl,server=on,wait=off" \
	-serial "file:$T/console.log" \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.workload=abratio opvm.args=600" \
	> "$T/qemu.log" 2>&1 &
CLEAN_PIDS=$!
wait_for "$T/console.log" "OPVM-TRUTH abratio share"
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "the guest did not start its workload"

# Host CPU load for the whole test (killed by cleanup).
sh -c 'while :; do :; done' &
CLEAN_PIDS="$! $CLEAN_PIDS"

timeout 240 python3 - "$T" "$OPVM" "$ROUNDS" <<'PYEOF'
import json, os, random, signal, socket, subprocess, sys, time
T, OPVM, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
random.seed(int(os.environ.get("STORM_SEED", str(os.getpid()))))

class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        self.f.readline()
        self.run("qmp_capabilities")
    def run(self, cmd):
        self.f.write(json.dumps({"execute": cmd}) + "\n"); self.f.flush()
        while True:
            r = json.loads(self.f.readline())
            if "event" not in r:
                if "error" in r:
                    raise RuntimeError("%s: %s" % (cmd, r["error"]))
                return r["return"]

ctl = Qmp(T + "/ctl")
if not ctl.run("query-status")["running"]:
    print("FAIL: the guest is not running before the first round"); sys.exit(1)
left_paused, stops, t0 = 0, 0, time.time()
ways = ["SIGINT", "SIGTERM", "duration"]
for rnd in range(ROUNDS):
    how = ways[rnd % 3]
    args = [OPVM, "attach", "--qmp", T + "/qmp", "--name", "vm", "-F", "100",
            "-d", "%s/s%d" % (T, rnd)]
    if how == "duration":
        args += ["--duration", "1.2"]
    out = open("%s/attach%d.out" % (T, rnd), "w")
    p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    # The storm, from the moment opvm samples (its session has the guest's
    # tree) until just before it is told to stop (a random moment), or a
    # little before its --duration ends.
    time.sleep(0.1)
    paused, end, limit = False, None, time.time() + 30
    tree = "%s/s%d/guests/vm" % (T, rnd)
    while end is None or time.time() < end:
        if end is None and os.path.isdir(tree):
            end = time.time() + (0.9 if how == "duration" else random.uniform(0.3, 0.9))
        if time.time() > limit or p.poll() is not None:
            break
        if end is None:
            time.sleep(0.01)
            continue
        ctl.run("cont" if paused else "stop")
        paused = not paused
        stops += paused
        time.sleep(random.uniform(0, 0.04))
    if paused:
        ctl.run("cont")
    # The owner wants it running from here on.
    time.sleep(random.uniform(0, 0.05))
    if how != "duration":
        p.send_signal(signal.SIGINT if how == "SIGINT" else signal.SIGTERM)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        print("FAIL: round %d: opvm did not exit" % rnd); sys.exit(1)
    out.close()
    st = ctl.run("query-status")
    text = open("%s/attach%d.out" % (T, rnd)).read()
    if rc != 0 or "samples:" not in text:
        print(text)
        print("FAIL: round %d (%s): opvm exited with %d" % (rnd, how, rc)); sys.exit(1)
    if not st["running"]:
        left_paused += 1
        print("round %d (%s): guest left %s after detach" % (rnd, how, st["status"]))
        print(text)
        ctl.run("cont")
    chardevs = Qmp.run(ctl, "query-chardev")
    if any(c["label"] in ("gdb", "opvm-gdb") for c in chardevs):
        print("FAIL: round %d: a gdbstub chardev is left: %s" % (rnd, chardevs)); sys.exit(1)
print("RESULT pause storm: guest running after detach in %d of %d rounds "
      "(%d owner pauses, %.0f s)" % (ROUNDS - left_paused, ROUNDS, stops, time.time() - t0))
sys.exit(1 if left_paused else 0)
PYEOF
rc=$?
[ $rc = 0 ] || fail "the guest was left paused (or opvm failed): see above"
echo PASS
