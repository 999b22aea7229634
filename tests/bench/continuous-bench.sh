#!/bin/bash
# What `opvm exporter --continuous` costs per guest, at its default 19 Hz
# a vCPU and 10 s windows:
#   continuous-cpu-per-guest-kvm   a firmware-only QEMU/KVM guest (the perf
#                                  sampler, never stopped) if /dev/kvm works
#   continuous-cpu-per-guest-tcg-idle  a firmware-only TCG guest (gdbstub)
#   continuous-cpu-per-guest-tcg-busy  the test image under TCG running
#                                  abratio, with opvm.ko (gdbstub)
#       each: its sampler child's CPU time (its threads' schedstat; clock
#       ticks, utime + stime, where a thread came or went)
#       over BENCH_S seconds of wall time, in % of one core;
#   continuous-cpu-per-guest       their mean, plus the exporter's own CPU
#                                  (its store thread, guest scans) shared
#                                  out (target <= 0.1, the issue's goal);
#   continuous-cpu-per-guest-steady[-KIND]  the same, measured again
#                                  BENCH_S seconds from STEADY_AT s after the
#                                  exporter started (default 75): a guest
#                                  without a kernel is past the first
#                                  minute's search of its RAM then, so this
#                                  is what a guest costs for good (0: not
#                                  measured);
#   continuous-rss-per-guest       the samplers' mean VmRSS, MB (target <= 16);
#   profile-serve-ms               the median wall time of 10 requests of
#                                  seconds=10 from the store (curl's total);
#   profile-serve-ms-max           the slowest of them (target < 200: each
#                                  answer, the issue's bound; a figure, not
#                                  a verdict, on a shared host).
# Prints those lines on stdout; details go to stderr.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp continuous-bench
T=$(realpath "$T")
P=cb$$
BENCH_S=${BENCH_S:-30}
STEADY_AT=${STEADY_AT:-75}
export XDG_CACHE_HOME=$T/cache
kvm=""
if [ -w /dev/kvm ]; then
	qemu-system-x86_64 -accel kvm -m 32 -nodefaults -display none -name "$P-kvm" \
		-qmp "unix:$T/qmp-kvm,server=on,wait=off" > "$T/qemu-kvm.log" 2>&1 &
	CLEAN_PIDS="$! $CLEAN_PIDS"
	kvm=1
fi
qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none -name "$P-tcg-idle" \
	-qmp "unix:$T/qmp-idle,server=on,wait=off" > "$T/qemu-idle.log" 2>&1 &
CLEAN_PIDS="$! $CLEAN_PIDS"
boot_channel_guest 256 "opvm.workload=abratio opvm.args=600" "$P-tcg-busy"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --allow-gdbstub --continuous \
	--store "$T/store" --guests "$P-*" --profile-dir "$T" > "$T/exporter.log" 2>&1 &
EXP=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP"
sleep 12	# samplers started, a first window sealed

python3 - "$EXP" "$PORT" "$P" "$BENCH_S" "${kvm:-0}" "$STEADY_AT" <<'EOF'
import os, statistics, subprocess, sys, time
exp, port, p, secs, kvm = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
steady_at, begin = int(sys.argv[6]), time.monotonic() - 12
tick = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    # (the scheduler's run time of each thread, in s; the threads; clock
    # ticks of the process, utime + stime, in s): ticks are 10 ms steps,
    # a third of what 30 s of a guest should cost, so they count only
    # where a thread came or went between two readings (its run time
    # would be lost) or schedstat is not compiled in (None)
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    ticks = (int(f[11]) + int(f[12])) / tick
    d = "/proc/%s/task" % pid
    try:
        tids = frozenset(os.listdir(d))
        ns = sum(int(open("%s/%s/schedstat" % (d, t)).read().split()[0]) for t in tids)
        return ns / 1e9, tids, ticks
    except (OSError, ValueError, IndexError):
        return None, None, ticks
def spent(a, b):
    if a[0] is None or b[0] is None or a[1] != b[1]:
        return b[2] - a[2]
    return b[0] - a[0]
def rss_mb(pid):
    for l in open("/proc/%s/status" % pid):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
def kids():
    out = {}
    for k in subprocess.run(["pgrep", "-P", exp], capture_output=True, text=True).stdout.split():
        cmd = open("/proc/%s/cmdline" % k).read().split("\0")
        if "attach" in cmd and "--name" in cmd:
            out[cmd[cmd.index("--name") + 1]] = k
    return out
k = kids()
want = ["%s-tcg-idle" % p, "%s-tcg-busy" % p] + (["%s-kvm" % p] if kvm else [])
if any(w not in k for w in want):
    print("SKIP: the samplers did not all start: %s" % k); sys.exit(77)
def measure(tag):
    c0 = {g: cpu(k[g]) for g in want}
    e0, t0 = cpu(exp), time.monotonic()
    time.sleep(secs)
    c1 = {g: cpu(k[g]) for g in want}
    e1, t1 = cpu(exp), time.monotonic()
    wall = t1 - t0
    per = {g: 100 * spent(c0[g], c1[g]) / wall for g in want}
    for g in want:
        print("continuous-cpu-per-guest%s-%s: %.3f %%" % (tag, g[len(p) + 1:], per[g]))
    own = 100 * spent(e0, e1) / wall / len(want)
    print("# the exporter itself%s: %.3f %% of a core a guest" % (tag, own), file=sys.stderr)
    print("continuous-cpu-per-guest%s: %.3f %% (target <= 0.1)" %
          (tag, statistics.mean(per.values()) + own))
measure("")
if steady_at:
    time.sleep(max(0, begin + steady_at - time.monotonic()))
    if kids() != k:
        print("FAIL: a sampler restarted: %s, then %s" % (k, kids())); sys.exit(1)
    measure("-steady")
print("continuous-rss-per-guest: %.1f MB (target <= 16)" % statistics.mean(rss_mb(k[g]) for g in want))
ms = []
for i in range(10):
    r = subprocess.run(["curl", "-sf", "-o", "/dev/null", "-w", "%{time_total}",
                        "http://127.0.0.1:%s/debug/pprof/profile?guest=%s-tcg-busy&seconds=10" % (port, p)],
                       capture_output=True, text=True)
    if r.returncode:
        print("FAIL: a profile from the store failed"); sys.exit(1)
    ms.append(1000 * float(r.stdout))
print("# serve times: %s" % " ".join("%.0f" % m for m in ms), file=sys.stderr)
print("profile-serve-ms: %.0f ms" % statistics.median(ms))
print("profile-serve-ms-max: %.0f ms (target < 200)" % max(ms))
EOF
