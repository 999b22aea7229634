#!/bin/bash
# Built-in KVM VMM end to end with the synthetic guest (tests/guests/):
# `opvm run --vmm=kvm` boots it, samples its vCPU with the task clock (timer
# mode: this host has no PMU), files samples through the collector, and
# `opvm report --format json` reads the sample files back with symbols.
# The first run's channel crosses the virtio-mmio console's org.opvm.0 port,
# the second's the synthetic guests' channel port.
#
# The guest runs two processes in two address spaces (different CR3s) on
# the same ring-3 code at the same virtual address: A loops in func_a, B in
# func_b (1:3 iterations), and a ring-0 loop (kfunc) at every switch.  It
# measures the truth itself (its vCPU thread's CPU time per mode and
# process, from the VMM's CPU-time port) and prints it on the serial console.  Asserted:
#   - the A:B split of user samples is within 3 percentage points of the
#     guest's truth (and of the 1:3 design);
#   - the user:kernel split is within 3 pp of the truth;
#   - every user sample lands in the right address space: no func_b in
#     process 1, no func_a in process 2, nothing unresolved;
#   - two events at once are filed apart (TIMER and task-clock);
#   - the rate cap throttles and counts.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/kvm-synthetic.$$
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"

if [ ! -e /dev/kvm ]; then
	echo "SKIP: no /dev/kvm on this host"
	exit 77
fi
if [ ! -f "$G/guest.elf" ] || [ ! -f "$G/guest-virtio.elf" ]; then
	make -s guests BUILD="$BUILD" >/dev/null || { echo "FAIL: cannot build the guests"; exit 1; }
fi
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the JSON report"; exit 77; }

# ---- run 1: timer mode, two events, per-thread files, channel over the
# virtio-mmio console (guest-virtio.elf drives it as Linux's virtio_console
# would) ------------------------------------------------------------------------
if ! "$OPVM" run --vmm=kvm --kernel "$G/guest-virtio.elf" --mem 64 -d "$T/s1" \
	--separate thread -e TIMER:1000 -e task-clock:2000000 >"$T/run1.out" 2>&1; then
	if tr '\n' ' ' < "$T/run1.out" | tr -s ' ' | grep -q "cannot use KVM here"; then
		echo "SKIP: $(grep -m1 'cannot use KVM' "$T/run1.out")"
		exit 77
	fi
	echo "FAIL: opvm run --vmm=kvm failed"; cat "$T/run1.out"; exit 1
fi
cat "$T/run1.out"
CON=$T/s1/guests/guest/console.log
grep -q "synthetic guest: done" "$CON" || { echo "FAIL: guest did not finish"; cat "$CON"; exit 1; }
grep -q "virtio console port org.opvm.0 open" "$CON" ||
	{ echo "FAIL: the guest did not open org.opvm.0 on the virtio console"; cat "$CON"; exit 1; }
for ev in TIMER task-clock; do
	"$OPVM" report --session-dir "$T/s1" --separate thread -l --format json \
		--guest-root "$G" --vmlinux "$G/guest-virtio.elf" "event:$ev" >"$T/report-$ev.json" \
		2>"$T/report-$ev.err" || { echo "FAIL: opvm report ($ev)"; cat "$T/report-$ev.err"; exit 1; }
done

python3 - "$T/report-TIMER.json" "$T/report-task-clock.json" "$CON" <<'PY' || exit 1
import json, re, sys
rep = json.load(open(sys.argv[1]))
rep2 = json.load(open(sys.argv[2]))
con = open(sys.argv[3]).read()
m = re.search(r"truth cpu_us user_a=(\d+) user_b=(\d+) kernel=(\d+)", con)
if not m:
    print("FAIL: no truth line on the guest console"); sys.exit(1)
ta, tb, tk = map(int, m.groups())
fails = []
a = b = k = other = 0
for s in rep["symbols"]:
    n = s["samples"]
    if s["kernel"]:
        k += n
        continue
    if s["image"] != "/user.elf":
        other += n
        fails.append("user sample outside /user.elf: %s" % s)
        continue
    if s["tgid"] == 1:
        a += n
        if s["symbol"] == "func_b":
            fails.append("func_b sampled in process 1 (A's address space): %d" % n)
    elif s["tgid"] == 2:
        b += n
        if s["symbol"] == "func_a":
            fails.append("func_a sampled in process 2 (B's address space): %d" % n)
    else:
        other += n
        fails.append("user sample in unknown process: %s" % s)
total = a + b + k + other
# task-clock samples follow the CPU time the vCPU thread gets, which a
# busy host cuts: the floor only says the guest was sampled (a fixed 500
# is the machine's speed).  Each sample stands for the same slice of that
# CPU time, the truth's own measure, so the splits' fixed bounds hold
if total < 50:
    fails.append("only %d samples" % total)
ab = 100.0 * a / max(a + b, 1)
ab_truth = 100.0 * ta / (ta + tb)
kern = 100.0 * k / max(total, 1)
kern_truth = 100.0 * tk / (ta + tb + tk)
print("RESULT kvm-synthetic samples=%d A=%d B=%d kernel=%d other=%d" % (total, a, b, k, other))
print("RESULT A share of user: %.1f%% (guest truth %.1f%%, design 25.0%%)" % (ab, ab_truth))
print("RESULT kernel share: %.1f%% (guest truth %.1f%%)" % (kern, kern_truth))
if abs(ab - ab_truth) > 3:
    fails.append("A:B split %.1f%% vs truth %.1f%%" % (ab, ab_truth))
if abs(ab - 25.0) > 3:
    fails.append("A:B split %.1f%% vs design 25%%" % ab)
if abs(kern - kern_truth) > 3:
    fails.append("user:kernel split: kernel %.1f%% vs truth %.1f%%" % (kern, kern_truth))
if rep.get("unresolved_samples", 0):
    fails.append("%d unresolved samples" % rep["unresolved_samples"])
if rep.get("mode") != "kvm-timer":
    fails.append("mode %r, expected kvm-timer" % rep.get("mode"))
ksyms = sum(s["samples"] for s in rep["symbols"] if s["kernel"] and s["symbol"] == "kfunc")
if ksyms < 0.5 * k:
    fails.append("kernel samples not in kfunc: %d of %d" % (ksyms, k))
t2 = rep2.get("total_samples", 0)
print("RESULT second event task-clock:2000000: %d samples (TIMER:1000: %d)" % (t2, total))
if not (0.25 * total <= t2 <= 0.8 * total):
    fails.append("task-clock at half TIMER's period has %d samples vs %d" % (t2, total))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY

# ---- run 2: the rate cap; channel on the synthetic guests' port ----------------
"$OPVM" run --vmm=kvm --kernel "$G/guest.elf" --mem 64 -d "$T/s2" -F 1000 \
	--max-rate 100 >"$T/run2.out" 2>&1 || { echo "FAIL: capped run"; cat "$T/run2.out"; exit 1; }
thr=$(sed -n 's/.* \([0-9]*\) throttled.*/\1/p' "$T/run2.out")
smp=$(sed -n 's/.* \([0-9]*\) samples, .*/\1/p' "$T/run2.out")
secs=$(sed -n 's/.* after \([0-9.]*\) s.*/\1/p' "$T/run2.out")
echo "RESULT rate cap 100/s: $smp samples, $thr throttled in ${secs}s"
if [ -z "$thr" ] || [ "$thr" -le 0 ]; then
	echo "FAIL: --max-rate 100 throttled nothing"; cat "$T/run2.out"; exit 1
fi
# 100/s plus the 100 ms burst allowance, with slack for timing.
if ! awk -v s="$smp" -v t="$secs" 'BEGIN { exit !(s <= 100 * t + 10 + 5) }'; then
	echo "FAIL: $smp samples in ${secs}s exceed the 100/s cap"; exit 1
fi
grep -h "host cost" "$T/run1.out" | sed 's/^ */MEASURED /'
exit 0
