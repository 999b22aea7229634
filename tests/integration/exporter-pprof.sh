#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# opvm exporter's guest profiles (/debug/pprof/, docs/usage.md), fetched by
# go tool pprof and curl while a real Prometheus scrapes /metrics:
#  - go tool pprof -top and -raw fetch .../profile?guest=A&seconds=10 from the
#    test image under TCG running abratio (exporter --allow-gdbstub):
#    func_b's share of abratio's func_a+func_b samples is within 1 pp of the
#    guest's truth (or 4 binomial standard deviations, if more: a
#    count-aware bound), and func_b's samples carry the guest's and the
#    process's labels;
#  - two profiles at once (A, and a BIOS-only guest B) while Prometheus
#    scrapes every second with a 1 s timeout: every scrape is up, and
#    Prometheus sees the profiler's metrics count the two;
#  - limits: a third profile at once gets 429 with Retry-After (and a
#    second one of a busy guest too); seconds=100000 comes back clipped, and
#    the X-Opvm-Clipped header says so; a client that hangs up mid-profile
#    frees its slot within 2 s, leaves no session directory and the guest
#    running; an exporter without --allow-gdbstub (on a unix socket) refuses
#    the TCG guest with 403 and why, and starts nothing; 404, 400, 405 get
#    one line of text;
#  - a guest that ran no code in the window (C, paused) gets a profile
#    without samples (200), not an error;
#  - the HTTP side (issue 37): a client that half-closes after its request
#    (shutdown(SHUT_WR)) gets its profile, HTTP/1.1 (after an interim 102)
#    and HTTP/1.0; every answer says `Connection: close` (/metrics, the
#    guests, a profile, each refusal) and curl fetching two URLs on one
#    connection gets both; 500 query parameters get a 400 with one line
#    (a profile and /metrics); guest=A%00x, seconds=%20-5, seconds=0x10
#    are refused; event=TIMER:0005000 is 5000 microseconds, not octal.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
command -v go >/dev/null 2>&1 || skip "go is not installed (golang-go, scripts/install-deps.sh)"
command -v prometheus >/dev/null 2>&1 || skip "prometheus is not installed (scripts/install-deps.sh)"
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp exporter-pprof
T=$(realpath "$T")
P=pp$$
A=$P-a
B=$P-b
C=$P-c
export HOME=$T GOCACHE=$T/gocache PPROF_TMPDIR=$T XDG_CACHE_HOME=$T/cache

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
EXP_PORT=$(free_port)
PROM_PORT=$(free_port)

# B: firmware only (samples, no processes); C: never started (-S)
qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none -name "$B" \
	-qmp "unix:$T/qmp-b,server=on,wait=off" > "$T/qemu-b.log" 2>&1 &
CLEAN_PIDS=$!
qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none -name "$C" -S \
	-qmp "unix:$T/qmp-c,server=on,wait=off" > "$T/qemu-c.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"

mkdir -p "$T/p1" "$T/p2"
"$OPVM" exporter --listen "127.0.0.1:$EXP_PORT" --no-libvirt --allow-gdbstub \
	--max-profile-seconds 10 --profile-dir "$T/p1" > "$T/exporter.log" 2>&1 &
EXP=$!
CLEAN_PIDS="$CLEAN_PIDS $EXP"
"$OPVM" exporter --listen "unix:$T/exp2.sock" --no-libvirt --profile-dir "$T/p2" \
	> "$T/exporter2.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"

cat > "$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: opvm-pprof
    static_configs:
      - targets: ['127.0.0.1:$EXP_PORT']
EOF
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" \
	--web.listen-address="127.0.0.1:$PROM_PORT" > "$T/prometheus.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"
for _ in $(seq 100); do
	curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && break
	sleep 0.3
done
curl -sf "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null || {
	tail -20 "$T/prometheus.log"; fail "prometheus did not become ready"; }

boot_channel_guest 384 "opvm.workload=abratio opvm.args=600" "$A"
for _ in $(seq 100); do
	grep -aq "OPVM-TRUTH abratio share" "$T/console.log" && break
	sleep 0.2
done
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "guest A did not start abratio"
truth=$(truth "$T/console.log" "abratio share")
echo "guest A: $truth"

U=http://127.0.0.1:$EXP_PORT/debug/pprof
curl -sf "$U/guests" > "$T/guests.json" || fail "no /debug/pprof/guests"
python3 - "$T/guests.json" "$A" <<'EOF' || exit 1
import json, sys
g = [x for x in json.load(open(sys.argv[1]))["guests"] if x["name"] == sys.argv[2]]
print("RESULT /debug/pprof/guests lists %s: %s" % (sys.argv[2], g))
sys.exit(0 if g and g[0]["sampler"] == "gdbstub" and g[0]["profile"] else 1)
EOF

metric() {	# metric NAME: its value in the exporter's /metrics
	curl -sf "http://127.0.0.1:$EXP_PORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
code() {	# code FILE: the HTTP status in a curl -D header file
	awk 'NR == 1 { print $2 }' "$1"
}

# ---- two profiles at once, go tool pprof -top, limits --------------------
t_two0=$(date +%s)
go tool pprof -top "$U/profile?guest=$A&seconds=10&event=TIMER:5000" > "$T/top.txt" 2> "$T/top.err" &
gop=$!
curl -s -D "$T/clip.hdr" -o "$T/b.pb.gz" "$U/profile?guest=$B&seconds=100000" &
cup=$!
sleep 1.5
curl -s -D "$T/third.hdr" -o "$T/third.txt" "$U/profile?guest=$C&seconds=2"
curl -s -D "$T/again.hdr" -o "$T/again.txt" "$U/profile?guest=$A&seconds=2"
wait $gop || { cat "$T/top.err"; fail "go tool pprof -top could not fetch the profile"; }
wait $cup || fail "curl could not fetch B's profile"
t_two1=$(date +%s)
cat "$T/top.txt"
echo "RESULT third request: $(code "$T/third.hdr"), Retry-After $(grep -i '^Retry-After' "$T/third.hdr" | tr -d '\r' | cut -d' ' -f2): $(cat "$T/third.txt")"
echo "RESULT a second request for guest A: $(code "$T/again.hdr"): $(cat "$T/again.txt")"
[ "$(code "$T/third.hdr")" = 429 ] || fail "a third profile at once was not refused with 429"
grep -qiE '^Retry-After: [1-9][0-9]*' "$T/third.hdr" || fail "no Retry-After with the 429"
[ "$(code "$T/again.hdr")" = 429 ] || fail "a second profile of a busy guest was not refused with 429"
# The guest's first profile: abratio's binary is fetched from the guest
# when its first sample is filed, and may come after the session's end on
# a slow host (it is in the cache for the next profile, -raw's below).
grep -qE 'func_b|\(no symbols\) abratio' "$T/top.txt" || fail "go tool pprof -top shows no abratio"
echo "RESULT clipped: $(grep -i '^X-Opvm' "$T/clip.hdr" | tr -d '\r' | tr '\n' ';')"
[ "$(code "$T/clip.hdr")" = 200 ] || fail "B's profile: $(code "$T/clip.hdr")"
grep -qi '^X-Opvm-Clipped: seconds=100000 clipped to 10' "$T/clip.hdr" ||
	fail "seconds=100000 is not said to be clipped"
grep -qi '^X-Opvm-Seconds: 10' "$T/clip.hdr" || fail "B's profile did not last 10 s"
go tool pprof -raw "$T/b.pb.gz" 2>&1 | grep -q "guest:\[$B\]" || fail "B's profile has no samples of B"

# Prometheus during those 10 s: every scrape up, and the two counted
sleep 2.5
q() { curl -sf "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"; }
win=$(( $(date +%s) - t_two0 + 1 ))
q "min_over_time(up{job=\"opvm-pprof\"}[${win}s])" > "$T/up.json" || fail "PromQL failed"
q "count_over_time(up{job=\"opvm-pprof\"}[$(( t_two1 - t_two0 ))s] offset $(( $(date +%s) - t_two1 ))s)" > "$T/count.json" || fail "PromQL failed"
q "opvm_profiles_served_total{job=\"opvm-pprof\"}" > "$T/served.json" || fail "PromQL failed"
q "opvm_profile_seconds_total{job=\"opvm-pprof\"}" > "$T/secs.json" || fail "PromQL failed"
python3 - "$T" $(( t_two1 - t_two0 )) <<'EOF' || exit 1
import json, sys
t, span = sys.argv[1], int(sys.argv[2])
v = lambda n: [float(r["value"][1]) for r in json.load(open("%s/%s.json" % (t, n)))["data"]["result"]]
up, count, served, secs = v("up"), v("count"), v("served"), v("secs")
print("RESULT prometheus over the two profiles (%d s): min(up) %s, %s scrapes, "
      "opvm_profiles_served_total %s, opvm_profile_seconds_total %s" % (span, up, count, served, secs))
ok = True
if up != [1.0]:
    print("FAIL: a scrape was down while two profiles ran"); ok = False
if not count or count[0] < span - 3:
    print("FAIL: fewer scrapes than seconds while two profiles ran"); ok = False
if served != [2.0]:
    print("FAIL: the profiler's metrics do not count the two profiles"); ok = False
if not secs or secs[0] < 20:
    print("FAIL: the profiler's seconds do not add up to 10 + 10"); ok = False
sys.exit(0 if ok else 1)
EOF

# ---- go tool pprof -raw: abratio's split and labels ----------------------
# (leading zeros: decimal, as every count; octal 0005000 would be 2560)
go tool pprof -raw "$U/profile?guest=$A&seconds=10&event=TIMER:0005000" > "$T/raw.txt" 2> "$T/raw.err" ||
	{ cat "$T/raw.err"; fail "go tool pprof -raw could not fetch the profile"; }
echo "RESULT event=TIMER:0005000: $(grep -E '^Period(Type)?:' "$T/raw.txt" | tr '\n' ' ')"
grep -q '^Period: 5000$' "$T/raw.txt" || fail "event=TIMER:0005000 was not read as 5000"
python3 - "$T/raw.txt" "$A" "$truth" <<'EOF' || exit 1
import math, re, sys
raw, guest, truth = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
tb = float(re.search(r"func_b=([0-9.]+)", truth).group(1))
locs = dict(re.findall(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", raw, re.M))
samples = re.findall(r"^\s+(\d+)\s+\d+: ([\d ]+)\n\s+(.*)$", raw.split("Locations")[0], re.M)
a = b = 0
blabels = set()
for n, ids, labels in samples:
    leaf = locs.get(ids.split()[0])
    if leaf == "func_a":
        a += int(n)
    if leaf == "func_b":
        b += int(n)
        blabels.add(labels.strip())
tot = a + b
# the floor only says abratio was sampled: the bound below is 4 binomial
# sigma of tot when that is more than 1 pp.  TIMER:5000 for 10 s asks for
# 2000 samples; two busy loops on both cores make the gdbstub round trip
# ~50 ms, 200 at most in all and fewer in func_a+func_b (200 was a minimum
# such a run cannot reach)
if tot < 20:
    print("FAIL: only %d samples in func_a and func_b" % tot); sys.exit(1)
share = b / tot
sd = math.sqrt(tb * (1 - tb) / tot)
bound = max(0.01, 4 * sd)
print("RESULT go tool pprof -raw: func_b %.2f %% of %d func_a+func_b samples (truth %.0f %%, "
      "bound %.2f pp)" % (100 * share, tot, 100 * tb, 100 * bound))
print("RESULT func_b's labels: %s" % sorted(blabels))
ok = True
if abs(share - tb) > bound + 1e-9:	# "within": 100 % against 99 % is 1 pp
    print("FAIL: func_b's share is off the truth by more than the bound"); ok = False
want = "guest:[%s]" % guest
if not blabels or any(want not in l or "process:[/usr/bin/abratio]" not in l for l in blabels):
    print("FAIL: func_b's samples are not labelled guest %s, process /usr/bin/abratio" % guest)
    ok = False
sys.exit(0 if ok else 1)
EOF

# ---- a client that hangs up ----------------------------------------------
# (polled on /debug/pprof/guests, which reads only /proc: a /metrics
# scrape also reads every guest of the host)
active() {
	curl -sf "$U/guests" | sed -n 's/^  "active": \([0-9]*\),$/\1/p'
}
curl -s -m 2 -o /dev/null "$U/profile?guest=$A&seconds=10"
t0=$(date +%s%N)
for _ in $(seq 40); do
	[ "$(active)" = 0 ] && break
	sleep 0.05
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
left=$(find "$T/p1" -mindepth 2 | wc -l)
echo "RESULT a client gone after 2 s: slot free after $ms ms, $left entries left in the" \
	"private directory, aborted $(metric opvm_profiles_aborted_total)"
[ "$(active)" = 0 ] && [ "$ms" -le 2000 ] ||
	fail "the profile of a client that went away still holds its slot after 2 s"
[ "$left" = 0 ] || { find "$T/p1"; fail "a session directory was left behind"; }
[ "$(metric opvm_profiles_aborted_total)" = 1 ] || fail "the abort is not counted"
python3 - "$T/qmp" <<'EOF' || fail "guest A does not run after the aborted profile"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw"); f.readline()
def run(c):
    f.write(json.dumps({"execute": c}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            return r
run("qmp_capabilities")
st = run("query-status")["return"]
print("RESULT guest A after the aborted profile: %s" % st["status"])
sys.exit(0 if st["running"] else 1)
EOF

# ---- a guest that runs no code: a profile without samples, not an error ---
curl -s -D "$T/empty.hdr" -o "$T/empty.pb.gz" "$U/profile?guest=$C&seconds=2"
go tool pprof -raw "$T/empty.pb.gz" > "$T/empty.txt" 2>&1
echo "RESULT a paused guest's profile: $(code "$T/empty.hdr"), $(grep -c ' guest:\[' "$T/empty.txt") samples"
[ "$(code "$T/empty.hdr")" = 200 ] && grep -q '^Samples:' "$T/empty.txt" ||
	{ cat "$T/empty.pb.gz" "$T/empty.txt"; fail "no empty profile of a paused guest"; }
[ "$(metric opvm_profile_errors_total)" = 0 ] || fail "a profile failed"

# ---- half-closed clients, Connection: close ---------------------------------
python3 - "$EXP_PORT" "/debug/pprof/profile?guest=$C&seconds=2" \
	"/debug/pprof/profile?guest=$B&seconds=1" <<'EOF' || fail "a half-closed client got no profile"
import socket, sys, threading
port, u11, u10 = int(sys.argv[1]), sys.argv[2], sys.argv[3]
got = {}
def ask(ver, url):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/%s\r\nHost: opvm\r\n\r\n" % (url, ver)).encode())
    s.shutdown(socket.SHUT_WR)      # the request is all it sends
    s.settimeout(60)
    d = b""
    while True:
        x = s.recv(65536)
        if not x:
            break
        d += x
    got[ver] = d
ts = [threading.Thread(target=ask, args=a) for a in (("1.1", u11), ("1.0", u10))]
[t.start() for t in ts]
[t.join() for t in ts]
ok = True
for ver, d in sorted(got.items()):
    interim = d.startswith(b"HTTP/1.1 102 ")
    if interim:
        d = d.split(b"\r\n\r\n", 1)[1]
    head, _, body = d.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    hdr = dict(l.split(b": ", 1) for l in lines[1:] if b": " in l)
    print("RESULT half-closed HTTP/%s client: %s, interim 102 first: %s, %d body bytes "
          "(Content-Length %s)" % (ver, lines[0].decode(errors="replace"), interim, len(body),
                                   hdr.get(b"Content-Length", b"?").decode()))
    if not lines[0].split(b" ")[1:2] == [b"200"] or \
            str(len(body)).encode() != hdr.get(b"Content-Length"):
        print("FAIL: the half-closed HTTP/%s client did not get its whole profile" % ver)
        ok = False
sys.exit(0 if ok else 1)
EOF
curl -s -D "$T/m.hdr" -o /dev/null "http://127.0.0.1:$EXP_PORT/metrics"
curl -s -D "$T/g.hdr" -o /dev/null "$U/guests"
for h in "$T/m.hdr" "$T/g.hdr" "$T/clip.hdr"; do
	grep -qi '^Connection: close' "$h" || fail "no Connection: close in $(head -1 "$h")"
done
two=$(curl -s -o /dev/null -o /dev/null -w '%{http_code}/%{num_connects} ' \
	"http://127.0.0.1:$EXP_PORT/metrics" "http://127.0.0.1:$EXP_PORT/metrics")
echo "RESULT two /metrics on one curl (status/new connections): $two"
[ "$two" = "200/1 200/1 " ] || fail "two requests on one curl were not both answered"

# ---- no --allow-gdbstub, unix socket, bad requests -----------------------
X=(curl -s --unix-socket "$T/exp2.sock")
"${X[@]}" -D "$T/tcg.hdr" -o "$T/tcg.txt" "http://opvm/debug/pprof/profile?guest=$A&seconds=2"
echo "RESULT TCG guest without --allow-gdbstub: $(code "$T/tcg.hdr"): $(cat "$T/tcg.txt")"
[ "$(code "$T/tcg.hdr")" = 403 ] && grep -q -- "--allow-gdbstub" "$T/tcg.txt" &&
	grep -q "stops the guest" "$T/tcg.txt" || fail "the TCG guest was not refused with a clear 403"
[ -z "$(find "$T/p2" -mindepth 2)" ] || fail "the refused profile left something in its directory"
check() {	# check STATUS METHOD URL: one line of text with that status
	"${X[@]}" -X "$2" -D "$T/h" -o "$T/b" "http://opvm$3"
	echo "RESULT $2 ${3:0:90}: $(code "$T/h"): $(cat "$T/b")"
	[ "$(code "$T/h")" = "$1" ] && [ "$(wc -l < "$T/b")" = 1 ] || fail "$2 $3: not $1 with one line"
	grep -qi '^Connection: close' "$T/h" || fail "$2 $3: no Connection: close"
}
check 404 GET "/debug/pprof/profile?guest=$P-nobody&seconds=2"
check 400 GET "/debug/pprof/profile?guest=$A&seconds=-1"
check 400 GET "/debug/pprof/profile?guest=$A&sekonds=2"
check 405 POST "/debug/pprof/profile?guest=$A&seconds=2"
check 404 GET "/debug/pprof/heap"
many=$(python3 -c 'print("&".join("p%d=1" % i for i in range(500)))')
check 400 GET "/debug/pprof/profile?guest=$A&$many"
check 400 GET "/metrics?$many"
check 400 GET "/debug/pprof/profile?guest=$A%00x&seconds=2"
check 400 GET "/debug/pprof/profile?guest=$A&seconds=%20-5"
check 400 GET "/debug/pprof/profile?guest=$A&seconds=0x10"
"${X[@]}" http://opvm/metrics | grep -E '^opvm_profiles_refused_total|^opvm_profiles_active' > "$T/m2"
cat "$T/m2"
grep -q 'reason="stops_guest"} 1' "$T/m2" || fail "the refusal is not counted"
grep -q '^opvm_profiles_active 0' "$T/m2" || fail "a refused request started a profile"
echo PASS
