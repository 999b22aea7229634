#!/bin/bash
# What serving a guest profile over HTTP costs beyond taking it:
#   exporter-profile-overhead: CPU time, in ms, of `opvm exporter` itself
#       (its HTTP server, the profile's worker thread, the guest lookup)
#       plus its `opvm export` child, for one 10 s profile fetched from
#       /debug/pprof/profile; the `opvm attach` child (the sampling) is left
#       out.  The test image under TCG runs abratio; the exporter's own CPU
#       is read from /proc/PID/stat, the export's from the exporter's
#       opvm_profile_cpu_seconds_total{step="export"} (its children's
#       rusage).  The mean of 3 profiles after a first one (which fetches
#       the guest's binaries): /proc counts in 10 ms ticks, so their sum
#       over three is finer than any one.  CPU time, not wall time.
# Prints that one line on stdout; details go to stderr.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp exporter-profile-bench
T=$(realpath "$T")
NAME=ppb$$
export XDG_CACHE_HOME=$T/cache
boot_channel_guest 384 "opvm.workload=abratio opvm.args=300" "$NAME"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --allow-gdbstub \
	--profile-dir "$T" > "$T/exporter.log" 2>&1 &
EXP=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP"
for _ in $(seq 100); do
	grep -aq "OPVM-TRUTH abratio share" "$T/console.log" && break
	sleep 0.2
done
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "the guest did not start abratio"

python3 - "$EXP" "$PORT" "$NAME" <<'EOF'
import os, re, statistics, subprocess, sys
pid, port, name = sys.argv[1:4]
tick = os.sysconf("SC_CLK_TCK")
def self_cpu():
    f = open("/proc/%s/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick      # utime + stime
def metric(key):
    m = subprocess.run(["curl", "-sf", "http://127.0.0.1:%s/metrics" % port],
                       capture_output=True, text=True).stdout
    return float(re.search(r"^%s (\S+)$" % re.escape(key), m, re.M).group(1))
EXPORT = 'opvm_profile_cpu_seconds_total{step="export"}'
ATTACH = 'opvm_profile_cpu_seconds_total{step="attach"}'
url = "http://127.0.0.1:%s/debug/pprof/profile?guest=%s&seconds=10" % (port, name)
runs = []
for i in range(4):
    e0, a0 = metric(EXPORT), metric(ATTACH)
    c0 = self_cpu()
    r = subprocess.run(["curl", "-sf", "-o", "/dev/null", url])
    c1 = self_cpu()
    e1, a1 = metric(EXPORT), metric(ATTACH)
    if r.returncode:
        print("FAIL: the profile request failed"); sys.exit(1)
    ms = 1000 * ((c1 - c0) + (e1 - e0))
    print("profile %d: exporter %.0f ms, export %.0f ms, attach (sampling, left out) %.0f ms"
          % (i, 1000 * (c1 - c0), 1000 * (e1 - e0), 1000 * (a1 - a0)), file=sys.stderr)
    if i:       # the first one fetches the guest's binaries into the cache
        runs.append(ms)
print("exporter-profile-overhead: %.0f ms" % statistics.mean(runs))
EOF
