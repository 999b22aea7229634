#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# A hostile guest against `opvm exporter --continuous` (issue 35, Must-show
# 6): one TCG guest (--allow-gdbstub) running `churn` (docs/guest.md), a
# new executable (/tmp/churn-N) in a new cgroup for every short-lived
# child, each spinning long enough to be sampled, so every window of the
# store is asked for new sample files all the time.  The exporter judged
# has 2 s windows, --retention 600 and a --max-store 768 KiB above what
# the store's files besides windows need (the guest's kallsyms, measured
# by a first exporter on the same store) and the sampler's room to write
# them anew, so a window's cap (--max-store / (retention/window + 512)) is
# a few KiB and the prunes have to drop windows to keep the store under
# --max-store.  Checked:
#  - the store's bytes on disk (du, blocks), every file counted (a
#    transfer's kallsyms.part too), read every second while the guest
#    churns and after, and as often as they can be while a part file is
#    there (inotify), never exceed --max-store: the judged exporter's
#    sampler, new, is sent the guest's kernel symbols again (introspection,
#    the modules' walk) beside the copy the store has (it writes nothing
#    of a table that repeats the store's: reported, fetch.ksyms.unchanged
#    in session.json; one that does not fits in its reserve);
#  - the overflow is counted: /debug/pprof/guests' store and the guest's
#    opvm_continuous_overflow_samples_total/_keys_total are > 0, and the
#    sealed windows' session.json say the same;
#  - windows were dropped for --max-store (the bound did work);
#  - the exporter still answers seconds=N for the guest with a gzipped
#    pprof Profile (its protobuf fields read back) holding samples;
#  - a range far longer than the retention: one line of 400; seconds= far
#    past the retention: a profile, clipped (X-Opvm-Clipped).
# Judged by what the store holds, never by a speed.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v du >/dev/null 2>&1 || skip "du is not installed"
[ -x "$IMG/root/usr/bin/churn" ] || skip "the test image has no churn workload: run 'make images'"
mk_tmp exporter-churn
T=$(realpath "$T")
P=ch$$
G=$P-g
ST=$T/store
SOCK=$T/exp.sock
CHURN_S=${CHURN_S:-25}
m() { curl -sf --unix-socket "$SOCK" "http://x$1"; }
start_exporter() {	# start_exporter MAX_STORE LOG
	"$OPVM" exporter --listen "unix:$SOCK" --no-libvirt --allow-gdbstub --continuous \
		--window 2 --retention 600 --max-store "$1" --store "$ST" --guests "$P-*" \
		--profile-dir "$T" > "$2" 2>&1 &
	EXP=$!
	CLEAN_PIDS="$CLEAN_PIDS $EXP"
	for _ in $(seq 100); do m /metrics >/dev/null 2>&1 && break; sleep 0.1; done
	m /metrics >/dev/null || fail "the exporter did not start: $(cat "$2")"
}
gstore() {	# gstore FIELD: /debug/pprof/guests' store.FIELD
	m /debug/pprof/guests | python3 -c 'import json, sys; print(json.load(sys.stdin)["store"][sys.argv[1]])' "$1"
}

# First an exporter without a tight cap, until the store holds the
# guest's kallsyms: what the store needs besides windows (other_bytes,
# about half of System.map's size here, but the guest's to say), and the
# room a sampler keeps to write them anew (ksyms_reserved_bytes, 4 MiB:
# more than this guest's).  Then the exporter that is judged, on the same
# store, with --max-store those and 768 KiB: room for the sampler's two
# windows and a dozen of the churn's (each its cap, a few KiB, and the
# {overflow} bucket and session.json the cap exempts), fewer than the
# churn makes.
start_exporter $((64 << 20)) "$T/exporter0.log"
boot_channel_guest 512 "opvm.workload=churn:$CHURN_S,100+idle:600" "$G"
for _ in $(seq 600); do
	[ "$(gstore other_bytes 2>/dev/null || echo 0)" -ge $((512 << 10)) ] && break
	sleep 0.2
done
OTHER=$(gstore other_bytes)
[ "$OTHER" -ge $((512 << 10)) ] || fail "the guest's kallsyms did not reach the store ($OTHER bytes besides windows)"
KROOM=$(gstore ksyms_reserved_bytes)
[ "$KROOM" -gt 0 ] || fail "no room kept for the sampler's kernel symbols"
# The store's bytes while a transfer's part file is in a guest's
# directory (kallsyms.part lasts about 0.1 s, which readings a second
# miss), as often as the store can be read, once $T/judged is there (the
# judged exporter's): one line a reading (inotify through ctypes, no
# package needed).  Started now, while the store has the guest's
# directory, and ready before the judged exporter starts.
python3 - "$ST" "$T/du-part.txt" "$T/judged" 2>"$T/du-part.log" <<'EOF' &
import ctypes, glob, os, struct, sys, time
st, out, go = sys.argv[1], open(sys.argv[2], "w", buffering=1), sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
dirs = {}
for d in glob.glob(st + "/*/guests/*/"):
    dirs[libc.inotify_add_watch(fd, d.encode(), 0x100 | 0x2)] = d	# CREATE, MODIFY
def du():
    n = os.lstat(st).st_blocks * 512
    for dp, dn, fn in os.walk(st):
        for x in dn + fn:
            try:
                n += os.lstat(os.path.join(dp, x)).st_blocks * 512
            except OSError:
                pass
    return n
print("watching %d" % len(dirs), file=sys.stderr, flush=True)
while True:
    buf, i, parts = os.read(fd, 1 << 16), 0, set()
    while i < len(buf):
        w, mask, _, ln = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + ln].rstrip(b"\0").decode()
        i += 16 + ln
        if name.endswith(".part") and w in dirs and os.path.exists(go):
            parts.add(dirs[w] + name)
    for p in parts:
        while os.path.exists(p):
            print(du(), p, file=out)
            time.sleep(0.005)
EOF
PW=$!
CLEAN_PIDS="$PW $CLEAN_PIDS"
kill "$EXP"
wait "$EXP" 2>/dev/null
for _ in $(seq 50); do grep -q watching "$T/du-part.log" 2>/dev/null && break; sleep 0.1; done
grep -q "watching [1-9]" "$T/du-part.log" || fail "no guest directory to watch: $(cat "$T/du-part.log")"
MAXS=$((OTHER + KROOM + (768 << 10)))
echo "RESULT the store besides windows: $OTHER bytes; a sampler's room for kallsyms: $KROOM; --max-store $MAXS"
touch "$T/judged"	# the watcher's readings from here
start_exporter "$MAXS" "$T/exporter.log"

# the store's bytes, every second, from the judged exporter's start
(
	while :; do
		echo "$(du -sB1 "$ST" 2>/dev/null | cut -f1)" \
			"$(m /metrics | awk '$1 == "opvm_store_windows" { print $2 }')"
		sleep 1
	done
) > "$T/du.txt" &
DU=$!
CLEAN_PIDS="$DU $CLEAN_PIDS"

wait_for "$T/console.log" "exit workload=churn" "$qpid" || fail "churn did not end: $(tail -n 5 "$T/console.log")"
grep -aq "OPVM-TRUTH churn done" "$T/console.log" || fail "churn failed: $(tail -n 5 "$T/console.log")"
truth "$T/console.log" "churn done"
# two windows sealed after the churn: its last counts are in
nw() { m /metrics | awk '$1 == "opvm_store_windows" { print $2 }'; }
w0=$(nw)
for _ in $(seq 300); do [ "$(( $(nw) ))" -ge $(( w0 + 2 )) ] && break; sleep 0.2; done

# the answers
now=$(date +%s)
m "/debug/pprof/guests" > "$T/guests.json" || fail "no /debug/pprof/guests"
m /metrics > "$T/metrics.txt" || fail "no /metrics"
code=$(curl -s --unix-socket "$SOCK" -o "$T/recent.pb.gz" -w '%{http_code}' \
	"http://x/debug/pprof/profile?guest=$G&seconds=20")
echo "RESULT seconds=20: $code, $(stat -c %s "$T/recent.pb.gz") bytes"
[ "$code" = 200 ] || fail "seconds=20 of the churning guest: $code $(head -c 300 "$T/recent.pb.gz")"
code=$(curl -s --unix-socket "$SOCK" -D "$T/huge-s.h" -o "$T/huge-s.pb.gz" -w '%{http_code}' \
	"http://x/debug/pprof/profile?guest=$G&seconds=999999999")
echo "RESULT seconds=999999999: $code, $(tr -d '\r' < "$T/huge-s.h" | grep -i '^X-Opvm-Clipped')"
[ "$code" = 200 ] && grep -qi '^X-Opvm-Clipped' "$T/huge-s.h" ||
	fail "seconds past the retention: not a clipped profile ($code)"
for q in "start=1&end=$now" "start=$((now - 100000000))"; do
	out=$(curl -s --unix-socket "$SOCK" -w ' %{http_code}' "http://x/debug/pprof/profile?guest=$G&$q")
	echo "RESULT $q: $out"
	case "$out" in "opvm exporter: "*" 400") ;; *) fail "$q: not one line of 400" ;; esac
	[ "$(printf '%s' "$out" | wc -l)" = 1 ] || fail "$q: more than one line"
done
kill "$DU" "$PW"
wait "$DU" "$PW" 2>/dev/null

python3 - "$T" "$ST" "$G" "$MAXS" <<'EOF' || exit 1
import glob, gzip, json, os, re, sys
t, st, g, maxs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
ok = True
def bad(msg):
    global ok
    print("FAIL: " + msg); ok = False

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if not c & 0x80: return v, i

def fields(b):	# the top-level fields of a protobuf message
    i, out = 0, {}
    while i < len(b):
        k, i = varint(b, i); f, w = k >> 3, k & 7
        if w == 0: _, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i); i += n
        elif w == 1: i += 8
        elif w == 5: i += 4
        else: raise ValueError("wire type %d" % w)
        out[f] = out.get(f, 0) + 1
    return out

# the store's bytes, every second
du = [l.split() for l in open(t + "/du.txt") if l.split()]
sizes = [int(l[0]) for l in du]
part = [int(l.split()[0]) for l in open(t + "/du-part.txt") if l.split()]
print("RESULT store bytes (every file, *.part too): %d readings, max %d, last %d, "
      "--max-store %d; %d readings during a transfer's *.part, max %d"
      % (len(sizes), max(sizes or [0]), sizes[-1] if sizes else 0, maxs, len(part),
         max(part or [0])))
if len(sizes) < 10:
    bad("too few readings of the store's size")
if max(sizes + part or [0]) > maxs:
    bad("the store held %d bytes, over --max-store %d" % (max(sizes + part), maxs))

# the overflow, counted three ways
s = json.load(open(t + "/guests.json"))["store"]
mine = [x for x in s.get("guests", []) if x.get("guest") == g]
mt = open(t + "/metrics.txt").read()
def metric(name):
    m = re.search(r'^%s\{guest="%s"[^}]*\} (\d+)' % (name, re.escape(g)), mt, re.M)
    return int(m.group(1)) if m else -1
ms, mk = metric("opvm_continuous_overflow_samples_total"), metric("opvm_continuous_overflow_keys_total")
wins = glob.glob("%s/*.%s/guests/*/samples/w-*" % (st, g))
jso = jsk = 0
ks = {}		# the judged sampler's kernel-symbol transfers, its latest window's
for w in sorted(wins):
    try:
        sj = json.load(open(w + "/session.json"))
        so = sj["store"]
        jso += so.get("overflow_samples", 0); jsk += so.get("overflow_keys", 0)
        ks = sj.get("fetch", {}).get("ksyms", ks)
    except (OSError, ValueError, KeyError, AttributeError):
        pass
print("RESULT the judged sampler's kernel symbols: %s transfers, %s repeated the store's "
      "(nothing written), %s capped, room %s"
      % (ks.get("done"), ks.get("unchanged"), ks.get("capped"), ks.get("max_bytes")))
print("RESULT window cap %d, windows %d (dropped: max_store %d, retention %d), bytes %d, other %d, reserved %d"
      % (s["window_cap"], s["windows"], s["windows_dropped_max_store"], s["windows_dropped_retention"],
         s["bytes"], s["other_bytes"], s["reserved_bytes"]))
print("RESULT overflow: guests %d samples %d keys; this guest %s; metrics %d samples %d keys; "
      "the %d windows kept: %d samples %d keys"
      % (s["overflow_samples"], s["overflow_keys"], mine, ms, mk, len(wins), jso, jsk))
if not (s["overflow_samples"] > 0 and s["overflow_keys"] > 0 and ms > 0 and mk > 0):
    bad("the churn's overflow is not counted")
if not mine or mine[0].get("overflow_samples", 0) <= 0:
    bad("/debug/pprof/guests does not count the guest's overflow")
if s["windows_dropped_max_store"] <= 0:
    bad("no window was dropped for --max-store: the churn did not fill the store")

# the answer
for f in ("recent", "huge-s"):
    try:
        fl = fields(gzip.open("%s/%s.pb.gz" % (t, f)).read())
    except Exception as e:
        bad("%s: not a gzipped profile: %s" % (f, e)); continue
    print("RESULT %s profile: %d samples, %d strings" % (f, fl.get(2, 0), fl.get(6, 0)))
    if not (1 in fl and 6 in fl and fl.get(2, 0) > 0):
        bad("%s: a profile without samples" % f)
sys.exit(0 if ok else 1)
EOF
echo "PASS: exporter --continuous against a churning guest"
