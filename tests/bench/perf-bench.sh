#!/bin/bash
# The perf sampler backend's cost, on the synthetic guest run by the
# built-in VMM (its own sampler at 1 Hz, i.e. off), sampled from outside by
# `opvm attach --pid` with host perf at 1000 samples/s (cpu-clock: this host
# has no PMU).
#
# Part 1, one sampled run of guest-perf.elf: opvm attach, and beside it on
# the same vCPU thread at the same rate `perf record -e cpu-clock -F 1000
# -t TID` (the kernel takes both streams of samples; each tool pays for its
# own).  Then the same two with nothing to sample (a QEMU/KVM guest waiting
# in its kernel) for as long: their start-up and idle work.
#   perf-sample-cost-opvm   opvm's CPU per sample filed: attach CPU less the
#                           idle attach's, but never less than its drain
#                           thread's own CPU per sample (the summary's)
#   perf-sample-cost-perf-record  perf record's CPU per sample written, less
#                           its idle run's in the same way
#   perf-sample-cost-vs-perf-record  the ratio (target <= 1.0: opvm files
#                           and attributes samples for no more CPU than perf
#                           spends writing them)
#   perf-attribution        user samples filed in the right process (func_a
#                           in A's address space, func_b in B's)
# Part 2, paired windows of one guest (guest-perf-pair.elf prints each B
# slice's vCPU CPU time as it ends; all slices do the same work): windows
# of PAIR_WIN seconds alternate sampled (an attach for the window) and
# unsampled, in ABBA order (S U U S S U U S ...), for PAIRS pairs; slices
# ending in a window's first PAIR_MARGIN seconds are left out (the
# attach's start-up, the previous one's exit).  Each block of four windows
# gives one estimate: the median slice of its two sampled windows over
# that of its two unsampled ones, less 1 (a block cancels a linear drift
# of the host's load and the order of the windows; a block with a window
# of fewer than 5 slices is left out).
#   perf-guest-slowdown     the median over the blocks, with the sign
#                           test's distribution-free interval (order
#                           statistics; its exact coverage printed, >= 95
#                           %).  The interval is what to read; the point
#                           estimate is shown clamped at 0 (a sampled window
#                           cannot be faster by construction, only by
#                           noise), the raw median on the # line.  SKIP
#                           with fewer than 6 blocks.
# CPU time, not wall time, throughout: host load from other processes
# delays the vCPU without charging it CPU time.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/perf-bench.$$
PAIRS=${PAIRS:-20}
PAIR_WIN=${PAIR_WIN:-1.5}
PAIR_MARGIN=${PAIR_MARGIN:-1.0}
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"

[ -e /dev/kvm ] || { echo "SKIP: perf bench: no /dev/kvm"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: perf bench: no python3"; exit 77; }
command -v perf >/dev/null && perf --version >/dev/null 2>&1 ||
	{ echo "SKIP: perf bench: no perf (linux-perf)"; exit 77; }
[ -f "$G/guest-perf.elf" ] && [ -f "$G/guest-perf-pair.elf" ] ||
	make -s guests BUILD="$BUILD" >/dev/null ||
	{ echo "perf bench: cannot build the guests" >&2; exit 1; }

timeout 900 python3 - "$T" "$OPVM" "$G" "$PAIRS" "$PAIR_WIN" "$PAIR_MARGIN" <<'PY'
import json, math, os, re, signal, subprocess, sys, threading, time
T, OPVM, G = sys.argv[1:4]
PAIRS, WIN, MARGIN = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
RUNDIRS = ("/run/opvm", os.environ.get("XDG_RUNTIME_DIR", "/nonexistent") + "/opvm",
           "/tmp/opvm-%d" % os.getuid())

def cpu_s(ru):
    return ru.ru_utime + ru.ru_stime

def boot(elf, d):
    vmm = subprocess.Popen([OPVM, "run", "--vmm=kvm", "--kernel", G + "/" + elf,
                            "--mem", "64", "-F", "1", "-d", d],
                           stdout=open(d + ".out", "w"), stderr=subprocess.STDOUT)
    for _ in range(100):
        if any(os.path.exists(r + "/vmm-%d" % vmm.pid) for r in RUNDIRS):
            break
        time.sleep(0.1)
    return vmm

def thread_named(pid, prefix):
    for _ in range(100):
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                if open("/proc/%d/task/%s/comm" % (pid, t)).read().startswith(prefix):
                    return int(t)
            except OSError:
                pass
        time.sleep(0.1)
    sys.exit("perf bench: no thread %s* in %d" % (prefix, pid))

def perf_start(tid, out):
    return subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000",
                             "-t", str(tid), "-o", out],
                            stdout=subprocess.DEVNULL, stderr=open(out + ".err", "w"))

def perf_stop(p, out):
    p.send_signal(signal.SIGINT)
    _, status, ru = os.wait4(p.pid, 0)
    n = subprocess.run("perf script -i %s -F ip 2>/dev/null | wc -l" % out, shell=True,
                       capture_output=True, text=True).stdout.strip()
    return cpu_s(ru), int(n or 0)

# ---- part 1: opvm attach and perf record on one vCPU thread -------------
vmm = boot("guest-perf.elf", T + "/s")
vtid = thread_named(vmm.pid, "opvm-vcpu")
att = subprocess.Popen([OPVM, "attach", "--pid", str(vmm.pid), "-d", T + "/a",
                        "--separate", "thread"],
                       stdout=open(T + "/a.out", "w"), stderr=subprocess.STDOUT)
pr = perf_start(vtid, T + "/p.data")
t0 = time.time()
_, status, ru = os.wait4(att.pid, 0)
wall = time.time() - t0
perf_cpu, perf_n = perf_stop(pr, T + "/p.data")
vmm.wait()
if status or vmm.returncode or not perf_n:
    sys.stderr.write(open(T + "/a.out").read() + open(T + "/s.out").read() +
                     open(T + "/p.data.err").read())
    sys.exit(1)
att_cpu = cpu_s(ru)

# The same two with no samples to take, for as long: a QEMU/KVM guest
# waiting in its kernel for a console byte that never comes.
qemu = subprocess.Popen(["qemu-system-x86_64", "-M", "microvm", "-accel", "kvm", "-cpu",
                         "qemu64", "-m", "64", "-display", "none", "-no-reboot",
                         "-name", "idle,debug-threads=on", "-kernel",
                         G + "/guest-mb.elf", "-serial", "null",
                         "-qmp", "unix:%s/qmp,server=on,wait=off" % T],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    if os.path.exists(T + "/qmp"):
        break
    time.sleep(0.1)
time.sleep(1)
qtid = thread_named(qemu.pid, "CPU 0/KVM")
idle = subprocess.Popen([OPVM, "attach", "--qmp", T + "/qmp", "--duration", "%.1f" % wall,
                         "-d", T + "/i"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
ipr = perf_start(qtid, T + "/pi.data")
_, _, iru = os.wait4(idle.pid, 0)
perf_idle_cpu, _ = perf_stop(ipr, T + "/pi.data")
qemu.terminate()
qemu.wait()
idle_cpu = cpu_s(iru)

rep = json.loads(subprocess.run([OPVM, "report", "--session-dir", T + "/a", "--separate",
                                 "thread", "-l", "--format", "json", "--guest-root", G],
                                capture_output=True, check=True).stdout)
samples = rep["total_samples"]
right = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and
            (s["tgid"], s["symbol"]) in ((1, "func_a"), (2, "func_b")))
wrong = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and
            s["symbol"] in ("func_a", "func_b")) - right
# opvm's side: the attach's CPU time less an attach without samples, but
# never less than what its drain thread alone spent per sample (the
# summary's figure: thread CPU time / samples), which the subtraction can
# hide when the idle attach's start-up costs more than the real one's.
m = re.search(r"drain thread: ([\d.]+) us CPU per\s+sample", open(T + "/a.out").read())
drain_ns = float(m.group(1)) * 1e3 if m else 0.0
opvm_ns = max(max(att_cpu - idle_cpu, 0) * 1e9 / max(samples, 1), drain_ns)
# perf record's the same way (it has no per-thread figure to floor it: its
# whole CPU time when the idle run's is larger)
perf_ns = (perf_cpu - perf_idle_cpu if perf_cpu > perf_idle_cpu else perf_cpu) * 1e9 / perf_n
print("perf-sample-cost-opvm: %.0f ns" % opvm_ns)
print("perf-sample-cost-perf-record: %.0f ns" % perf_ns)
print("perf-sample-cost-vs-perf-record: %.2f (target <= 1.0)" % (opvm_ns / perf_ns))
print("perf-attribution: %.3f %% (target >= 99.5)" % (100.0 * right / max(right + wrong, 1)))
print("# perf bench: opvm %d samples, attach CPU %.3f s in %.1f s, idle attach %.3f s, "
      "drain thread %.0f ns a sample; perf record %d samples, CPU %.3f s, idle %.3f s; "
      "load average %s" % (samples, att_cpu, wall, idle_cpu, drain_ns, perf_n, perf_cpu,
                           perf_idle_cpu, open("/proc/loadavg").read().split()[0]))

# ---- part 2: paired sampled / unsampled windows of one guest ------------
d = T + "/w"
vmm = boot("guest-perf-pair.elf", d)
con = d + "/guests/guest/console.log"
slices = []                  # (host time the line was read, slice CPU us)
done = threading.Event()

def reader():
    buf, pos = "", 0
    while not done.is_set():
        try:
            with open(con) as f:
                f.seek(pos)
                data = f.read()
                pos = f.tell()
        except OSError:
            data = ""
        now = time.monotonic()
        buf += data
        *lines, buf = buf.split("\n")
        for ln in lines:
            if ln.startswith("b "):
                slices.append((now, int(ln[2:])))
            elif "synthetic guest: done" in ln:
                done.set()
        time.sleep(0.02)

th = threading.Thread(target=reader, daemon=True)
th.start()
windows = []                 # (sampled, t_from, t_to)
for k in range(2 * PAIRS):
    if done.is_set() or vmm.poll() is not None:
        break
    sampled = (k % 4) in (0, 3)          # ABBA: S U U S S U U S ...
    t0 = time.monotonic()
    if sampled:
        a = subprocess.Popen([OPVM, "attach", "--pid", str(vmm.pid), "--duration",
                              "%.1f" % (MARGIN + WIN), "-d", "%s/a%d" % (T, k)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(MARGIN + WIN)
        windows.append((True, t0 + MARGIN, time.monotonic()))
        a.wait()
    else:
        time.sleep(MARGIN + WIN)
        windows.append((False, t0 + MARGIN, time.monotonic()))
done.set()
if vmm.poll() is None:
    vmm.terminate()
vmm.wait()
th.join()

def median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else None

# a window with fewer than MIN_SLICES slices (the guest got little CPU
# then) has no median worth pairing
MIN_SLICES = 10
per = [[us for t, us in slices if lo <= t < hi] for _, lo, hi in windows]
med = [median(v) if len(v) >= MIN_SLICES else None for v in per]
# One estimate per ABBA block of four windows (S U U S or U S S U): the
# median slice over its two sampled windows over that over its two
# unsampled ones.  A block is balanced for a linear drift of the host's
# load and for the order of the windows (the attach's start-up and exit
# fall on both sides), which a single S/U pair is not.
blocks = []
for i in range(0, len(windows) - 3, 4):
    s = [us for j in range(i, i + 4) if windows[j][0] for us in per[j]]
    u = [us for j in range(i, i + 4) if not windows[j][0] for us in per[j]]
    if min(len(per[j]) for j in range(i, i + 4)) >= MIN_SLICES // 2 and \
            len(s) >= MIN_SLICES and len(u) >= MIN_SLICES:
        blocks.append(median(s) / median(u) - 1)
n = len(blocks)
# the sign test's distribution-free interval for the median needs 6 blocks
# for a 95 % coverage (ranks 1 and n at n = 6: 96.9 %)
if n < 6:
    print("SKIP: perf-guest-slowdown: %d ABBA blocks of windows with slices (the guest "
          "got too little CPU on this host; PAIRS=%d gives at most %d)" % (
              n, PAIRS, PAIRS // 2))
    sys.exit(0)
# Median of the blocks with the sign test's interval: ranks k and n + 1 - k,
# k the largest with P(Binomial(n, 1/2) < k) <= 2.5 %.  Robust to the odd
# block the host's load spoils, where a mean and its Student t interval
# are pulled by it.
def binom_cdf(k, n):
    return sum(math.comb(n, j) for j in range(k + 1)) / 2.0 ** n
k = 1
while binom_cdf(k, n) <= 0.025:
    k += 1
cover = 1 - 2 * binom_cdf(k - 1, n)
srt = sorted(blocks)
med = (srt[(n - 1) // 2] + srt[n // 2]) / 2
lo, hi = srt[k - 1], srt[n - k]
print("perf-guest-slowdown: %.2f %% (%.0f%% CI %.2f..%.2f %%, median of %d ABBA blocks "
      "of windows, sign-test interval; target <= 1)" % (max(med, 0) * 100, cover * 100,
                                                        lo * 100, hi * 100, n))
print("# perf-guest-slowdown: %d slices in %d windows of %.1f s (+%.1f s margin; "
      "slices per window %s), median slice %d us; per block %s %%; raw median %.2f %%" % (
          len(slices), len(windows), WIN, MARGIN, " ".join(str(len(v)) for v in per),
          median([u for _, u in slices]), " ".join("%.2f" % (x * 100) for x in blocks),
          med * 100))
PY
