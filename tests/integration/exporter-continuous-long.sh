#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# The long run of `opvm exporter --continuous` (OPVM_LONG_TESTS=1; about
# six minutes, so not in make check): three TCG guests (the test image
# running callpaths, and two firmware-only ones), the default 10 s
# windows, a real Prometheus scraping /metrics every 5 s, and the scrape
# loop of docs/usage.md pulling seconds=10 of each guest every 10 s for
# OPVM_LONG_SECONDS (300).
#  - every answer 200 and a gzipped pprof;
#  - every window present: each guest's windows tile the run (no gap, no
#    overlap) and their samples add up to what its sampler took (after
#    the exporter's end, which seals the last ones);
#  - Prometheus: every scrape up, opvm_continuous_samplers 3 throughout,
#    no window dropped;
#  - the answers' wall times are printed (median, max), not judged: a
#    shared host's speed is no verdict.
. "$(dirname "$0")/qemu-common.bash"
[ -n "${OPVM_LONG_TESTS:-}" ] || skip "the long run: set OPVM_LONG_TESTS=1"
need_qemu
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v prometheus >/dev/null 2>&1 || skip "prometheus is not installed (scripts/install-deps.sh)"
mk_tmp exporter-continuous-long
T=$(realpath "$T")
P=el$$
SECS=${OPVM_LONG_SECONDS:-300}
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
PROM_PORT=$(free_port)
U=http://127.0.0.1:$PORT/debug/pprof
ST=$T/store
for g in b c; do
	qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none -name "$P-$g" \
		-qmp "unix:$T/qmp-$g,server=on,wait=off" > "$T/qemu-$g.log" 2>&1 &
	CLEAN_PIDS="$! $CLEAN_PIDS"
done
"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --allow-gdbstub --continuous \
	--store "$ST" --guests "$P-*" --profile-dir "$T" > "$T/exporter.log" 2>&1 &
EXP=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP"
boot_channel_guest 256 "opvm.workload=callpaths:100000" "$P-a"
cat > "$T/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  scrape_timeout: 2s
scrape_configs:
  - job_name: opvm-continuous
    static_configs:
      - targets: ['127.0.0.1:$PORT']
EOF
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" \
	--web.listen-address="127.0.0.1:$PROM_PORT" > "$T/prometheus.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && break
	sleep 0.3
done
sleep 12	# a first window of every guest
t0=$(date +%s)
mkdir -p "$T/scrape"
i=0
while [ $(( $(date +%s) - t0 )) -lt "$SECS" ]; do
	for g in "$P-a" "$P-b" "$P-c"; do
		curl -s -o "$T/scrape/$g-$i.pb.gz" -w "%{http_code} %{time_total}\n" \
			"$U/profile?guest=$g&seconds=10" >> "$T/scrape/$g.codes"
	done
	i=$((i + 1))
	sleep 10
done
t1=$(date +%s)
q() { curl -sf "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"; }
q "min_over_time(up{job=\"opvm-continuous\"}[$(( t1 - t0 ))s])" > "$T/up.json"
q "min_over_time(opvm_continuous_samplers[$(( t1 - t0 ))s])" > "$T/smin.json"
q "max_over_time(opvm_continuous_samplers[$(( t1 - t0 ))s])" > "$T/smax.json"
q "sum(opvm_store_windows_dropped_total)" > "$T/dropped.json"
kill "$EXP"	# its samplers seal their last windows: the sums are whole
wait "$EXP"

python3 - "$T" "$ST" "$OPVM" "$P" <<'EOF' || exit 1
import glob, gzip, json, os, subprocess, sys
t, st, opvm, p = sys.argv[1:5]
ok = True
def bad(m):
    global ok
    print("FAIL: " + m); ok = False
v = lambda n: [float(r["value"][1]) for r in json.load(open("%s/%s.json" % (t, n)))["data"]["result"]]
print("RESULT prometheus: min(up) %s, samplers min %s max %s, windows dropped %s"
      % (v("up"), v("smin"), v("smax"), v("dropped")))
if v("up") != [1.0] or v("smin") != [3.0] or v("smax") != [3.0] or v("dropped") != [0.0]:
    bad("prometheus saw a scrape down, a sampler missing or a window dropped")
for g in ("a", "b", "c"):
    name = "%s-%s" % (p, g)
    codes = [l.split() for l in open("%s/scrape/%s.codes" % (t, name))]
    secs = sorted(float(c[1]) for c in codes)
    good = sum(1 for c in codes if c[0] == "200")
    dec = sum(1 for f in glob.glob("%s/scrape/%s-*.pb.gz" % (t, name)) if gzip.open(f).read(2))
    d = glob.glob("%s/*.%s/guests/*/samples" % (st, name))[0]
    ws = sorted((int(n[2:15]), int(n[16:29])) for n in os.listdir(d) if n.startswith("w-"))
    gaps = [(a[1], b[0]) for a, b in zip(ws, ws[1:]) if a[1] != b[0]]
    sess = glob.glob("%s/*.%s" % (st, name))[0]
    r = subprocess.run([opvm, "report", "--format", "json", "-d", sess, "--since", "0"],
                       capture_output=True, text=True)
    total = json.loads(r.stdout)["total_samples"] if not r.returncode else -1
    last = sorted(n for n in os.listdir(d) if n.startswith("w-"))[-1]
    recv = json.load(open("%s/%s/session.json" % (d, last)))["stats"]["received"]
    print("RESULT %s: %d scrapes, %d answered 200, %d pprof; wall median %.3f s, max %.3f s; "
          "%d windows, gaps %s; samples in the windows %d, received %d"
          % (name, len(codes), good, dec, secs[len(secs) // 2], secs[-1], len(ws), gaps, total, recv))
    if good != len(codes) or dec != len(codes) or gaps or total != recv or total <= 0:
        bad("%s: a scrape failed, a window is missing, or the windows' sum is off" % name)
sys.exit(0 if ok else 1)
EOF
echo "PASS: exporter --continuous, the long run"
