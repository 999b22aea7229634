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
timeout 300 python3 - "$T" "$OPVM" <<'PYEOF' || { cat "$T/qemu.log"; exit 1; }
import os, socket, subprocess, sys, time
T, OPVM = sys.argv[1], sys.argv[2]
for _ in range(100):
    try:
        c = socket.socket(socket.AF_UNIX); c.connect(T + "/con"); break
    except OSError:
        time.sleep(0.1)
else:
    print("FAIL: no console socket"); sys.exit(1)
log, buf = open(T + "/console.log", "wb"), b""
def read_until(what, secs):
    global buf
    c.settimeout(0.2)
    end = time.time() + secs
    while what not in buf and time.time() < end:
        try:
            d = c.recv(4096)
        except socket.timeout:
            continue
        if not d:
            break
        buf += d; log.write(d); log.flush()
    return what in buf
if not read_until(b"waiting for a byte", 30):
    print("FAIL: the guest did not boot under QEMU/KVM"); sys.exit(1)
p = subprocess.Popen([OPVM, "attach", "--qmp", T + "/qmp", "--channel", T + "/chan",
                      "--name", "vm", "-d", T + "/s", "--separate", "thread"],
                     stdout=open(T + "/attach.out", "w"), stderr=subprocess.STDOUT)
limit = time.time() + 30
while not os.path.isdir(T + "/s/guests/vm") and p.poll() is None and time.time() < limit:
    time.sleep(0.05)
time.sleep(0.3)
c.sendall(b"g")
done = read_until(b"synthetic guest: done", 200)
rc = p.wait(timeout=60)
print(open(T + "/attach.out").read())
if not done:
    print("FAIL: the guest did not finish"); sys.exit(1)
if rc != 0:
    print("FAIL: opvm attach exited with %d" % rc); sys.exit(1)
PYEOF

"$OPVM" report --session-dir "$T/s" --separate thread -l --format json \
	--guest-root "$G" >"$T/report.json" 2>"$T/report.err" ||
	{ echo "FAIL: opvm report"; cat "$T/report.err"; exit 1; }
python3 - "$T/report.json" "$T/console.log" "$T/attach.out" <<'PY' || exit 1
import json, re, sys
rep = json.load(open(sys.argv[1]))
con = open(sys.argv[2], errors="replace").read()
out = open(sys.argv[3]).read()
fails = []
ta, tb = map(int, re.search(r"truth work a=(\d+) b=(\d+)", con).groups())
gu, gk, host = map(int, re.search(
    r"perf samples: (\d+) guest user, (\d+) guest kernel; (\d+) host-mode", out).groups())
named = int(re.search(r"switch rings: (\d+) named", out).group(1))
a = b = right = wrong = 0
for s in rep["symbols"]:
    n = s["samples"]
    if s["kernel"]:
        continue
    if s["app"] == "{anon-cr3:0x0}":
        continue    # not named by the ring: counted below (named >= 90 %)
    if s["image"] != "/user.elf":
        fails.append("user sample outside the guest's /user.elf: %s" % s)
        continue
    a += n if s["tgid"] == 1 else 0
    b += n if s["tgid"] == 2 else 0
    if (s["tgid"], s["symbol"]) in ((1, "func_a"), (2, "func_b")):
        right += n
    elif s["symbol"] in ("func_a", "func_b"):
        wrong += n
total = rep["total_samples"]
ab = 100.0 * a / max(a + b, 1)
truth = 100.0 * ta / (ta + tb)
rightpct = 100.0 * right / max(right + wrong, 1)
namedpct = 100.0 * named / max(gu + gk, 1)
print("RESULT kvm-perf-qemu samples=%d (guest user %d, kernel %d; host-mode seen %d, filed 0)"
      % (total, gu, gk, host))
print("RESULT A share of user: %.2f%% (guest truth by work %.2f%%)" % (ab, truth))
print("RESULT right address space: %.3f%% of %d func_a/func_b samples; named by the "
      "switch ring: %.3f%%" % (rightpct, right + wrong, namedpct))
if total < 1000:
    fails.append("only %d samples" % total)
if total != gu + gk:
    fails.append("%d samples filed, %d guest-mode read" % (total, gu + gk))
if abs(ab - truth) > 2:
    fails.append("A:B split %.2f%% vs truth %.2f%%" % (ab, truth))
if rightpct < 99.5:
    fails.append("only %.3f%% in the right address space" % rightpct)
# The issue's measures are the split and the address space (asserted
# above).  The share named by the ring varied 94.7-100 % between fresh runs
# at low load (cause not found yet: docs/kvm.md); 90 % still catches a join
# that does not work.
if namedpct < 90:
    fails.append("only %.3f%% named by the switch ring" % namedpct)
if "sampler perf, event cpu-clock;" not in out or rep.get("mode") != "perf-timer":
    fails.append("the summary or report does not say sampler perf / mode perf-timer")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
exit 0
