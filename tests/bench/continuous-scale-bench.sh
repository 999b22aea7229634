#!/bin/bash
# What `opvm exporter --continuous` costs the host as guests are added: 5,
# 10 and 20 firmware-only guests (QEMU/KVM under the perf sampler where
# /dev/kvm works, else TCG under the gdbstub with --allow-gdbstub), each at
# the default 19 Hz a vCPU and 10 s windows.  For each count:
#   continuous-scale-cpu-N    the exporter and all its samplers' CPU time
#                             (utime + stime of the exporter and every
#                             child, /proc) over BENCH_S seconds, in % of
#                             one core, all guests together
#   continuous-scale-rss-N    the same processes' VmRSS summed, MB
# and the least-squares line through the three points, extrapolated:
#   continuous-scale-cpu-100  % of one core at 100 guests
#   continuous-scale-rss-100  MB at 100 guests
# Guests that have no OS cost the sampler little of its own work: these
# figures are the fixed cost a guest adds (the sampler process, its timers,
# the store's windows, introspection searching RAM for a kernel at its
# slowest rate), not the cost of a busy guest's samples
# (continuous-bench.sh measures those).  The measurement starts WARM_S
# (default 45) seconds after the exporter: a guest's first 30 s are
# searched once a second, for a kernel that is booting (docs/introspection.md),
# and then less and less often; continuous-scale-cpu-first-N is the
# first 30 s alone, the price of a guest that is starting.
. "$(dirname "$0")/../integration/qemu-common.bash"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
mk_tmp continuous-scale
T=$(realpath "$T")
P=cs$$
BENCH_S=${BENCH_S:-30}
WARM_S=${WARM_S:-45}
COUNTS=${SCALE_COUNTS:-"5 10 20"}
export XDG_CACHE_HOME=$T/cache
accel=tcg
extra=--allow-gdbstub
if [ -w /dev/kvm ]; then
	accel=kvm
	extra=
fi
echo "# $accel firmware-only guests, ${BENCH_S} s a count" >&2

# start_guests FROM TO: guests $P-FROM .. $P-TO
start_guests() {
	local i
	for i in $(seq "$1" "$2"); do
		qemu-system-x86_64 -accel $accel -m 32 -nodefaults -display none \
			-name "$P-$i" -qmp "unix:$T/qmp-$i,server=on,wait=off" \
			> "$T/qemu-$i.log" 2>&1 &
		CLEAN_PIDS="$! $CLEAN_PIDS"
	done
}

# measure N: starts an exporter over the N guests running, prints its line
measure() {
	local port exp
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	rm -rf "$T/store"
	"$OPVM" exporter --listen "127.0.0.1:$port" --no-libvirt $extra --continuous \
		--store "$T/store" --guests "$P-*" --profile-dir "$T" > "$T/exporter-$1.log" 2>&1 &
	exp=$!
	python3 - "$exp" "$1" "$BENCH_S" "$WARM_S" <<'EOF' || { kill $exp; return 1; }
import os, subprocess, sys, time
exp, n, secs, warm = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tick = os.sysconf("SC_CLK_TCK")
def kids():
    r = subprocess.run(["pgrep", "-P", exp], capture_output=True, text=True)
    return r.stdout.split()
def cpu(pid):
    try:
        f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(f[11]) + int(f[12])) / tick
def rss(pid):
    try:
        for l in open("/proc/%s/status" % pid):
            if l.startswith("VmRSS:"):
                return int(l.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
deadline = time.monotonic() + 60
while len(kids()) < n and time.monotonic() < deadline:
    time.sleep(0.5)
if len(kids()) < n:
    print("SKIP: %d of %d samplers started" % (len(kids()), n)); sys.exit(77)
pids = [exp] + kids()
f0, s0 = sum(cpu(p) for p in pids), time.monotonic()
time.sleep(30)
f1 = sum(cpu(p) for p in pids)
print("continuous-scale-cpu-first-%d: %.2f %%" % (n, 100 * (f1 - f0) / (time.monotonic() - s0)))
time.sleep(max(0, warm - 30))
e0, c0, t0 = cpu(exp), sum(cpu(p) for p in pids), time.monotonic()
time.sleep(secs)
pids1 = [exp] + kids()
if len(pids1) != len(pids):
    print("FAIL: samplers ended during the measurement"); sys.exit(1)
e1, c1, t1 = cpu(exp), sum(cpu(p) for p in pids), time.monotonic()
print("# %d guests: the exporter itself %.2f %%" % (n, 100 * (e1 - e0) / (t1 - t0)), file=sys.stderr)
print("continuous-scale-cpu-%d: %.2f %%" % (n, 100 * (c1 - c0) / (t1 - t0)))
print("continuous-scale-rss-%d: %.1f MB" % (n, sum(rss(p) for p in pids1)))
EOF
	local st=$?
	kill $exp 2>/dev/null
	wait $exp 2>/dev/null
	return $st
}

have=0
out=$T/lines
for n in $COUNTS; do
	start_guests $((have + 1)) "$n"
	have=$n
	sleep 2
	measure "$n" | tee -a "$out"
	st=${PIPESTATUS[0]}
	[ "$st" = 0 ] || exit "$st"
done
python3 - "$out" <<'EOF'
import re, sys
pts = {"cpu": [], "rss": []}
for l in open(sys.argv[1]):
    m = re.match(r"continuous-scale-(cpu|rss)-(\d+): ([\d.]+)", l)
    if m:
        pts[m.group(1)].append((int(m.group(2)), float(m.group(3))))
for k, unit in (("cpu", "%"), ("rss", "MB")):
    xs, ys = zip(*pts[k])
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    a = my - b * mx
    print("# %s: %.3f + %.4f a guest" % (k, a, b), file=sys.stderr)
    print("continuous-scale-%s-100: %.1f %s" % (k, a + 100 * b, unit))
EOF
