#!/bin/bash
# The perf sampler backend's cost, on the synthetic guest (guest-perf.elf)
# run by the built-in VMM (its own sampler at 1 Hz, i.e. off), once
# unsampled and once sampled from outside by `opvm attach --pid` with host
# perf at 1000 samples/s (cpu-clock: this host has no PMU).  The guest
# measures itself: the vCPU thread's CPU time (the VMM's CPU-time port) of
# each of its ~400 B slices, which all do the same work; the median slice
# is its speed.  CPU time, not wall time: host load from other processes
# delays the vCPU without charging it CPU time; the median keeps slices
# slowed by cache or sibling-thread contention out.
#   perf-guest-slowdown   1 - median slice time unsampled / sampled
#   perf-sample-cost      the kernel's side (timer interrupt, VM exit, perf
#                          record: slowdown x vCPU CPU time / samples) plus
#                          opvm's: the attach process's CPU time (drain,
#                          join, collector, files) less what an attach that
#                          gets no samples spends in the same wall time (its
#                          start-up and once-a-second work, printed apart),
#                          per sample filed
#   perf-sample-cost-opvm opvm's part of it alone
#   perf-attribution      user samples filed in the right process (func_a
#                          in A's address space, func_b in B's)
# One run each, side by side; on a shared, loaded machine the median slice
# time still differs by a few percent between two unsampled runs, so the
# load average is printed with the figures.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/perf-bench.$$
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"

[ -e /dev/kvm ] || { echo "SKIP: perf bench: no /dev/kvm"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: perf bench: no python3"; exit 77; }
[ -f "$G/guest-perf.elf" ] || make -s guests BUILD="$BUILD" >/dev/null ||
	{ echo "perf bench: cannot build the guests" >&2; exit 1; }

# The unsampled run goes at the same time as the sampled one, so both meet
# the same host load (two unsampled runs one after the other differed by
# 24 % in median slice time here).
"$OPVM" run --vmm=kvm --kernel "$G/guest-perf.elf" --mem 64 -F 1 -d "$T/u" \
	>"$T/u.out" 2>&1 &
UNSAMPLED=$!

timeout 600 python3 - "$T" "$OPVM" "$G" <<'PY'
import json, os, re, subprocess, sys, time
T, OPVM, G = sys.argv[1:4]
vmm = subprocess.Popen([OPVM, "run", "--vmm=kvm", "--kernel", G + "/guest-perf.elf",
                        "--mem", "64", "-F", "1", "-d", T + "/s"],
                       stdout=open(T + "/s.out", "w"), stderr=subprocess.STDOUT)
for _ in range(100):
    if any(os.path.exists(d + "/vmm-%d" % vmm.pid) for d in
           ("/run/opvm", os.environ.get("XDG_RUNTIME_DIR", "/nonexistent") + "/opvm",
            "/tmp/opvm-%d" % os.getuid())):
        break
    time.sleep(0.1)
att = subprocess.Popen([OPVM, "attach", "--pid", str(vmm.pid), "-d", T + "/a",
                        "--separate", "thread"],
                       stdout=open(T + "/a.out", "w"), stderr=subprocess.STDOUT)
t0 = time.time()
_, status, ru = os.wait4(att.pid, 0)
wall = time.time() - t0
vmm.wait()
if status or vmm.returncode:
    sys.stderr.write(open(T + "/a.out").read() + open(T + "/s.out").read())
    sys.exit(1)
att_cpu_ns = (ru.ru_utime + ru.ru_stime) * 1e9

# The same attach with no samples to take, for as long: a QEMU/KVM guest
# waiting in its kernel for a console byte that never comes.
qemu = subprocess.Popen(["qemu-system-x86_64", "-M", "microvm", "-accel", "kvm", "-cpu",
                         "qemu64", "-m", "64", "-display", "none", "-no-reboot", "-kernel",
                         G + "/guest-mb.elf", "-serial", "null",
                         "-qmp", "unix:%s/qmp,server=on,wait=off" % T],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    if os.path.exists(T + "/qmp"):
        break
    time.sleep(0.1)
time.sleep(1)
idle = subprocess.Popen([OPVM, "attach", "--qmp", T + "/qmp", "--duration", "%.1f" % wall,
                         "-d", T + "/i"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, _, iru = os.wait4(idle.pid, 0)
qemu.terminate()
qemu.wait()
idle_ns = (iru.ru_utime + iru.ru_stime) * 1e9

def truth(path):
    con = open(path).read()
    ua, ub, k = map(int, re.search(r"truth cpu_us user_a=(\d+) user_b=(\d+) kernel=(\d+)",
                                   con).groups())
    med = int(re.search(r"truth b_slice_cpu_us median=(\d+)", con).group(1))
    return ua + ub + k, med

while not os.path.exists(T + "/u/guests/guest/console.log") or \
        "done" not in open(T + "/u/guests/guest/console.log").read():
    time.sleep(0.5)
cpu_u, med_u = truth(T + "/u/guests/guest/console.log")
cpu_s, med_s = truth(T + "/s/guests/guest/console.log")
rep = json.loads(subprocess.run([OPVM, "report", "--session-dir", T + "/a", "--separate",
                                 "thread", "-l", "--format", "json", "--guest-root", G],
                                capture_output=True, check=True).stdout)
samples = rep["total_samples"]
right = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and
            (s["tgid"], s["symbol"]) in ((1, "func_a"), (2, "func_b")))
wrong = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and
            s["symbol"] in ("func_a", "func_b")) - right
slow = 100.0 * (1 - med_u / med_s)
kern_ns = slow / 100 * cpu_s * 1e3 / max(samples, 1)
# opvm's side: the attach's CPU time less an attach without samples, but
# never less than what its drain thread alone spent per sample (the
# summary's figure: thread CPU time / samples), which the subtraction can
# hide when the idle attach's start-up costs more than the real one's.
m = re.search(r"drain thread: ([\d.]+) us CPU per\s+sample", open(T + "/a.out").read())
drain_ns = float(m.group(1)) * 1e3 if m else 0.0
opvm_ns = max(max(att_cpu_ns - idle_ns, 0) / max(samples, 1), drain_ns)
secs = cpu_s / 1e6
print("perf-sample-cost: %.0f ns" % (kern_ns + opvm_ns))
print("perf-sample-cost-opvm: %.0f ns" % opvm_ns)
print("perf-guest-slowdown: %.2f %%" % slow)
print("perf-attribution: %.3f %%" % (100.0 * right / max(right + wrong, 1)))
print("# perf bench: %d samples in %.1f s of vCPU time (%.0f/s); median B slice %d us "
      "unsampled, %d us sampled; cost %.0f ns kernel + %.0f ns opvm (attach CPU %.3f s "
      "in %.1f s, an attach without samples %.3f s); load average %s"
      % (samples, secs, samples / secs, med_u, med_s, kern_ns, opvm_ns, att_cpu_ns / 1e9,
         wall, idle_ns / 1e9, open("/proc/loadavg").read().split()[0]))
PY
rc=$?
wait $UNSAMPLED || { cat "$T/u.out" >&2; exit 1; }
exit $rc
