#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# opvm exporter --continuous (docs/usage.md): every guest sampled all the
# time into a rolling store of windows, profiles served from it at once.
# Three TCG guests (--allow-gdbstub, windows of 2 s): A, the test image
# running callpaths, then abratio for 6 s only, then callpaths again; B and
# D, firmware only.  Where /dev/kvm runs it, two QEMU/KVM guests K1 and K2
# too: the synthetic guest (guest-mb-long.elf, as kvm-perf-qemu.sh boots
# it), sampled by perf, never stopped; else a SKIP-PART line and the TCG
# part alone.  A scrape loop pulls seconds=2 of each guest every 2 s.
#  - every answer of the loop is 200 and a gzipped pprof Profile (its
#    protobuf fields read back); the last ones go through go tool pprof;
#  - every window present: each guest's windows tile time with no gap and
#    no overlap while its sampler runs (end of one == start of the next),
#    and their samples add up to what the sampler took (session.json's
#    received): the windows' sum is one long session;
#  - the KVM guests' samples are filed as they run (every window from
#    two after the guest was let go has some, and the last, sealed when
#    QEMU is stopped, holds no more than three times the busiest before
#    it), every one labelled with its guest;
#  - a guest started mid-run (C) gets a sampler and windows; stopped, it
#    leaves /debug/pprof/guests and its sampler ends, its windows served;
#  - a past range: start=&end= inside abratio's time (from A's console)
#    shows abratio, ranges before and after it show none;
#  - bad ranges (reversed, future, expired, too long, seconds with start)
#    get one line of 400; a range without windows, a profile of none;
#  - the exporter SIGKILLed: its samplers end too (no orphan), and a new
#    exporter on the same store serves the old windows (abratio's range);
#  - the whole retention asked eight times at once: each answer 200 with
#    X-Opvm-Windows within the guest's windows, or one line of 429;
#  - the byte cap: an exporter with --max-store 3/4 of a copy of the
#    store drops the oldest windows first, counts them, and keeps under it.
# Bounds are counts (the windows' sums), never a speed.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp exporter-continuous
T=$(realpath "$T")
P=ec$$
A=$P-a
B=$P-b
C=$P-c
D=$P-d
K1=$P-k1
K2=$P-k2
KG=""	# the KVM guests that run
export HOME=$T GOCACHE=$T/gocache PPROF_TMPDIR=$T XDG_CACHE_HOME=$T/cache
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
U=http://127.0.0.1:$PORT/debug/pprof
ST=$T/store
now_ms() { date +%s%3N; }
metric() { curl -sf "http://127.0.0.1:$PORT/metrics" | awk -v n="$1" '$1 == n { print $2 }'; }
start_exporter() {	# start_exporter LOG: the exporter on $PORT over $ST
	"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --allow-gdbstub --continuous \
		--window 2 --store "$ST" --guests "$P-*" --profile-dir "$T" > "$1" 2>&1 &
	EXP=$!
	CLEAN_PIDS="$CLEAN_PIDS $EXP"
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$PORT/metrics" >/dev/null 2>&1 && return
		sleep 0.1
	done
	fail "the exporter did not start: $(cat "$1")"
}
bios_guest() {	# bios_guest NAME: firmware only, no kernel; its pid in $!
	qemu-system-x86_64 -accel tcg -m 32 -nodefaults -display none -name "$1" \
		-qmp "unix:$T/qmp-$1,server=on,wait=off" > "$T/qemu-$1.log" 2>&1 &
}

kvm_guest() {	# kvm_guest NAME: the synthetic guest under KVM, its console driven
	mkdir -p "$T/$1"
	qemu-system-x86_64 -M microvm -accel kvm -cpu qemu64 -m 64 -display none -no-reboot \
		-name "$1" -kernel "$GG/guest-mb-long.elf" \
		-chardev "socket,id=con,path=$T/$1/con,server=on,wait=on" -serial chardev:con \
		-chardev "socket,id=ch,path=$T/$1/chan,server=on,wait=off" \
		-device isa-serial,chardev=ch,iobase=0x2f8,irq=3 \
		-device isa-debug-exit,iobase=0x501,iosize=1 \
		-qmp "unix:$T/$1/qmp,server=on,wait=off" > "$T/$1/qemu.log" 2>&1 &
	KPIDS="$KPIDS $!"
	CLEAN_PIDS="$! $CLEAN_PIDS"
	python3 "$(dirname "$0")/synth-kvm-guest.py" "$T/$1" 120 "$ST/*.$1/guests/*/samples" &
	CLEAN_PIDS="$! $CLEAN_PIDS"
}
kvm_part() {	# why the KVM part cannot run here, or nothing
	[ -e /dev/kvm ] || { echo "no /dev/kvm on this host"; return; }
	[ -f "$GG/guest-mb-long.elf" ] || make -s guests BUILD="$BUILD" >/dev/null 2>&1 ||
		{ echo "the synthetic guests do not build"; return; }
}
GG=$(realpath "$BUILD/tests/guests")
KPIDS=""
start_exporter "$T/exporter.log"
why=$(kvm_part)
if [ -z "$why" ]; then
	kvm_guest "$K1"
	kvm_guest "$K2"
fi
for g in "$B" "$D"; do
	bios_guest "$g"
	CLEAN_PIDS="$! $CLEAN_PIDS"
done
boot_channel_guest 256 "opvm.workload=callpaths:4+abratio:6+callpaths:600" "$A"

# ---- the scrape loop ------------------------------------------------------
mkdir -p "$T/scrape"
(
	i=0
	while :; do
		for g in "$A" "$B" "$D" $(cat "$T/kg" 2>/dev/null); do
			curl -s -o "$T/scrape/$g-$i.pb.gz" -w "%{http_code} %{time_total}\n" \
				"$U/profile?guest=$g&seconds=2" >> "$T/scrape/$g.codes"
		done
		i=$((i + 1))
		sleep 2
	done
) &
LOOP=$!
CLEAN_PIDS="$LOOP $CLEAN_PIDS"

# the KVM guests that booted and run under their sampler (the rest: why not)
if [ -z "$why" ]; then
	for g in "$K1" "$K2"; do
		for _ in $(seq 300); do [ -s "$T/$g/state" ] && break; sleep 0.5; done
		st=$(cat "$T/$g/state" 2>/dev/null)
		if [ "$st" = running ]; then KG="$KG $g"; else why="$why$g: ${st:-no state} ($(head -c 300 "$T/$g/qemu.log")); "; fi
	done
	echo "$KG" > "$T/kg"
fi
[ -n "$why" ] && echo "RESULT SKIP-PART: KVM guests: $why"
NK=$(echo $KG | wc -w)

# abratio's time, as the guest's console shows it (host wall clock)
wait_for "$T/console.log" "OPVM-TRUTH abratio share"
ab0=$(now_ms)
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "guest A did not start abratio"
wait_for "$T/console.log" "exit workload=abratio"
ab1=$(now_ms)
grep -aq "exit workload=abratio" "$T/console.log" || fail "abratio did not end"
echo "abratio ran from $ab0 to $ab1 (ms, host clock)"

# ---- a guest started and stopped mid-run ----------------------------------
# listed NAME: NAME among /debug/pprof/guests' guests (the store's counts
# beside them name guests that have windows, running or not)
listed() {
	curl -sf "$U/guests" | python3 -c '
import json, sys
sys.exit(0 if any(g.get("name") == sys.argv[1] for g in json.load(sys.stdin)["guests"]) else 1)' "$1"
}
bios_guest "$C"
cpid=$!
CLEAN_PIDS="$cpid $CLEAN_PIDS"
for _ in $(seq 100); do
	[ -n "$(ls "$ST"/*."$C"/guests/*/samples/ 2>/dev/null | grep '^w-')" ] && break
	sleep 0.2
done
listed "$C" || fail "guest C is not in /debug/pprof/guests"
for _ in $(seq 100); do
	[ "$(ls "$ST"/*."$C"/guests/*/samples/ 2>/dev/null | grep -c '^w-')" -ge 2 ] && break
	sleep 0.2
done
echo "RESULT guest C: $(ls "$ST"/*."$C"/guests/*/samples/ | grep -c '^w-') windows, samplers $(metric opvm_continuous_samplers)"
[ "$(metric opvm_continuous_samplers)" = $((4 + NK)) ] || fail "not $((4 + NK)) samplers with C running"
kill "$cpid"
for _ in $(seq 100); do [ "$(metric opvm_continuous_samplers)" = $((3 + NK)) ] && break; sleep 0.2; done
[ "$(metric opvm_continuous_samplers)" = $((3 + NK)) ] || fail "C's sampler did not end with C"
listed "$C" && fail "guest C still listed after it stopped"
code=$(curl -s -o "$T/c.pb.gz" -w '%{http_code}' "$U/profile?guest=$C&start=$(( ab0 / 1000 - 600 ))")
echo "RESULT guest C gone: its windows served: $code"
[ "$code" = 200 ] || fail "guest C's windows are not served after it went"

# wait for a window past abratio's end and the margin, then stop the loop
sleep 5
kill "$LOOP"
wait "$LOOP" 2>/dev/null

# the KVM guests stopped: their samplers end and seal their last windows
for k in $KPIDS; do kill "$k" 2>/dev/null; done
for _ in $(seq 100); do [ "$(metric opvm_continuous_samplers)" = 3 ] && break; sleep 0.2; done
[ "$(metric opvm_continuous_samplers)" = 3 ] || fail "the KVM guests' samplers did not end with them"

# ---- bad ranges --------------------------------------------------------------
now=$(date +%s)
for q in "start=0" "start=$now&end=$((now - 10))" "start=$((now + 100))" "start=$((now - 90000))&end=$((now - 89900))" \
	"start=$((now - 90000))" "seconds=5&start=$now" "start=yesterday"; do
	out=$(curl -s -w ' %{http_code}' "$U/profile?guest=$A&$q")
	echo "RESULT $q: $out"
	case "$out" in "opvm exporter: "*" 400") ;; *) fail "$q: not one line of 400" ;; esac
	[ "$(printf '%s' "$out" | wc -l)" = 1 ] || fail "$q: more than one line"
done

# a range of no window (before the guests): a profile without samples
code=$(curl -s -o "$T/none.pb.gz" -w '%{http_code}' "$U/profile?guest=$A&start=$((now - 600))&end=$((now - 590))")
echo "RESULT a range of no window: $code, $(stat -c %s "$T/none.pb.gz") bytes"
[ "$code" = 200 ] || fail "a range without windows is not an empty profile"

# ---- the past range, before the kill ------------------------------------------
W=2000
pr() {	# pr OUT START_MS END_MS: the store's profile of A for that range
	curl -sf -o "$1" "$U/profile?guest=$A&start=$(( $2 / 1000 )).$(printf %03d $(( $2 % 1000 )))&end=$(( $3 / 1000 )).$(printf %03d $(( $3 % 1000 )))"
}
pr "$T/during.pb.gz" $(( ab0 + W )) $(( ab1 - W )) || fail "no profile of abratio's time"

# ---- SIGKILL, restart ------------------------------------------------------------
kids=$(pgrep -P "$EXP" | tr '\n' ' ')
kill -9 "$EXP"
for _ in $(seq 100); do
	alive=""
	for k in $kids; do kill -0 "$k" 2>/dev/null && alive="$alive $k"; done
	[ -z "$alive" ] && break
	sleep 0.2
done
echo "RESULT exporter SIGKILLed: its samplers ($kids) alive after: '${alive}'"
[ -z "$alive" ] && [ -n "$kids" ] || fail "the samplers outlived the exporter"
start_exporter "$T/exporter2.log"
pr "$T/after-restart.pb.gz" $(( ab0 + W )) $(( ab1 - W )) || fail "the restarted exporter serves no old window"
sleep 3	# its samplers: new windows
pr "$T/before.pb.gz" $(( ab0 - 30000 )) $(( ab0 - W - W / 2 )) || fail "no profile before abratio"
pr "$T/after.pb.gz" $(( ab1 + W + W / 2 )) $(( ab1 + 4000 )) || fail "no profile after abratio"
# ---- every window at once, eight times at once: bounded answers --------------
now=$(date +%s)
apids=""
for i in $(seq 8); do
	curl -s -D "$T/all-$i.h" -o "$T/all-$i.out" -w '%{http_code}' \
		"$U/profile?guest=$A&start=$((now - 3590))" > "$T/all-$i.code" &
	apids="$apids $!"
done
wait $apids
nw=$(ls "$ST"/*."$A"/guests/*/samples/ | grep -c '^w-')
n200=0
for i in $(seq 8); do
	code=$(cat "$T/all-$i.code")
	w=$(tr -d '\r' < "$T/all-$i.h" | awk -F': ' '$1 == "X-Opvm-Windows" { print $2 }')
	case "$code" in
	200) n200=$((n200 + 1))
	     [ -n "$w" ] && [ "$w" -ge 1 ] && [ "$w" -le "$nw" ] ||
		fail "the whole retention: X-Opvm-Windows '$w' not within A's $nw windows" ;;
	429) [ "$(wc -l < "$T/all-$i.out")" -le 1 ] || fail "a 429 of more than one line" ;;
	*) fail "the whole retention, eight at once: answer $code" ;;
	esac
done
echo "RESULT the whole retention, eight at once: $n200 answered 200 (windows $(cat "$T"/all-*.h | tr -d '\r' | awk -F': ' '$1 == "X-Opvm-Windows" { printf "%s ", $2 }')of $nw), the rest 429"
[ "$n200" -ge 1 ] || fail "no answer for the whole retention"
kill "$EXP"
wait "$EXP" 2>/dev/null

# ---- the byte cap, over a copy ---------------------------------------------------
cp -a "$ST" "$T/capped"
# a cap of three quarters of what the copy holds: some windows must go,
# the newest must stay (the store's other files and the running samplers'
# reserve count against it too: a fixed 1M left no window at all)
CAPB=$(( $(du -sb "$T/capped" | cut -f1) * 3 / 4 ))
export CAPB
for d in "$T/capped"/*/guests/*/samples; do ls "$d" | grep '^w-' | sed "s|^|$d/|"; done | sort > "$T/before-cap.txt"
"$OPVM" exporter --listen "unix:$T/cap.sock" --no-libvirt --continuous --window 2 \
	--store "$T/capped" --max-store "$CAPB" --guests "$P-*" --profile-dir "$T" > "$T/exporter-cap.log" 2>&1 &
CAP=$!
CLEAN_PIDS="$CLEAN_PIDS $CAP"
for _ in $(seq 100); do
	curl -sf --unix-socket "$T/cap.sock" http://x/metrics > "$T/cap.metrics" 2>/dev/null && break
	sleep 0.1
done
kill "$CAP"

python3 - "$T" "$ST" "$OPVM" "$A" "$B" "$C" "$ab0" "$ab1" "$D" $KG <<'EOF' || exit 1
import glob, gzip, json, os, re, subprocess, sys
t, st, opvm, A, B, C, ab0, ab1, D = sys.argv[1:10]
KG = sys.argv[10:]
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

# the scrape loop's answers
for g in [A, B, D] + KG:
    codes = [l.split() for l in open("%s/scrape/%s.codes" % (t, g))]
    n200 = sum(1 for c in codes if c[0] == "200")
    secs = sorted(float(c[1]) for c in codes)
    decoded = 0
    for f in glob.glob("%s/scrape/%s-*.pb.gz" % (t, g)):
        try:
            fl = fields(gzip.open(f).read())
            if 6 in fl and 1 in fl:	# string_table, sample_type
                decoded += 1
        except Exception as e:
            bad("%s does not decode: %s" % (f, e))
    print("RESULT scrapes of %s: %d, %d answered 200, %d decoded as pprof; time per answer "
          "median %.3f s, max %.3f s" % (g, len(codes), n200, decoded, secs[len(secs) // 2], secs[-1]))
    if n200 != len(codes) or decoded != len(codes) or len(codes) < 3:
        bad("a scrape of %s was not a profile" % g)

# every window present, and their sum one long session
def windows(g):
    d = glob.glob("%s/*.%s/guests/*/samples" % (st, g))[0]
    ws = sorted(n for n in os.listdir(d) if n.startswith("w-"))
    return d, [(int(n[2:15]), int(n[16:29]), n) for n in ws]

def count(g, s, e):
    d = glob.glob("%s/*.%s" % (st, g))[0]
    r = subprocess.run([opvm, "report", "--format", "json", "-d", d, "--since",
                        "%d.%03d" % (s // 1000, s % 1000), "--until", "%d.%03d" % (e // 1000, e % 1000)],
                       capture_output=True, text=True)
    return json.loads(r.stdout)["total_samples"] if r.returncode == 0 else 0

for g in [A, B, C, D] + KG:
    d, ws = windows(g)
    gaps = [(a[1], b[0]) for a, b in zip(ws, ws[1:]) if a[1] != b[0]]
    overlaps = [g2 for g2 in gaps if g2[1] < g2[0]]
    # a new sampler (the restart) starts where its first window does: one
    # gap at most, the time the exporter was down
    print("RESULT %s: %d windows, %d gaps %s, %d overlaps" % (g, len(ws), len(gaps), gaps, len(overlaps)))
    if overlaps or len(gaps) > (1 if g != C else 0) or len(ws) < 3:
        bad("%s's windows do not tile" % g)

# the first sampler of A: the windows up to the gap (or all), against the
# received count its last window's session.json kept
d, ws = windows(A)
first = ws
for i, (a, b) in enumerate(zip(ws, ws[1:])):
    if a[1] != b[0]:
        first = ws[:i + 1]
        break
per = [count(A, s, e) for s, e, n in first]
whole = count(A, first[0][0], first[-1][1])
meta = json.load(open("%s/%s/session.json" % (d, first[-1][2])))
recv = meta["stats"]["received"]
print("RESULT A's first sampler: %d windows, their samples one by one add up to %d, "
      "all at once %d, the sampler received %d" % (len(first), sum(per), whole, recv))
# the equalities are the verdict; 5 only says the sampler took samples
# (a busy host's gdbstub round trip is ~100 times an idle one's)
if sum(per) != whole or whole != recv or whole < 5:
    bad("the windows' sum is not the sampler's one long session")

# the KVM guests: one sampler each, from the guest's start to its stop
for g in KG:
    d, ws = windows(g)
    per = [count(g, s, e) for s, e, n in ws]
    whole = count(g, ws[0][0], ws[-1][1])
    recv = json.load(open("%s/%s/session.json" % (d, ws[-1][2])))["stats"]["received"]
    print("RESULT %s (KVM, perf): %d windows, samples per window %s, all at once %d, "
          "the sampler received %d" % (g, len(ws), per, whole, recv))
    if sum(per) != whole or whole != recv or whole < 5:
        bad("%s: the windows' sum is not the sampler's one long session" % g)
    # samples are filed as the guest runs, not held back: every window
    # but the last that starts two windows after the guest was let go
    # (its state file written) has samples, and the last holds three
    # windows' worth at most (each no more than the busiest window before
    # it).  A sample goes into its own window or, reaching the collector
    # within its hold time (2 s, a window here) of the window's end, the
    # next; the last also takes what was on its way when QEMU stopped
    # (the perf sampler's wait for the switch rings, 16 drain passes,
    # ~1.6 s).  A guest that is not Linux had its samples held through
    # introspection's whole search for its kernel (~30 s) and then 60 s
    # each: 15 empty windows, or 204 of 332 samples in the last.
    go = os.path.getmtime("%s/%s/state" % (t, g)) * 1000
    empty = [i for i, ((s, e, n), c) in enumerate(zip(ws[:-1], per[:-1])) if s >= go + 4000 and not c]
    busiest = max(per[:-1] or [0])
    if empty or per[-1] > 3 * busiest:
        bad("%s: filed late: windows %s empty (of %d, the guest let go at %d), the last "
            "holds %d of %d samples, the busiest before it %d"
            % (g, empty, len(ws), go, per[-1], whole, busiest))
    if not any(g.encode() in gzip.open(f).read() for f in glob.glob("%s/scrape/%s-*.pb.gz" % (t, g))):
        bad("no profile of %s names its guest" % g)

# the past range: abratio only then
def abratio(f):
    r = subprocess.run(["go", "tool", "pprof", "-raw", f], capture_output=True, text=True)
    if r.returncode:
        return None
    return len(re.findall(r"abratio", r.stdout)), len(re.findall(r"^\s+\d+\s+\d+:", r.stdout.split("Locations")[0], re.M))
have_go = subprocess.run(["sh", "-c", "command -v go"], capture_output=True).returncode == 0
for name, want in (("during", True), ("after-restart", True), ("before", False), ("after", False)):
    f = "%s/%s.pb.gz" % (t, name)
    if have_go:
        r = abratio(f)
        if r is None:
            bad("go tool pprof cannot read the %s profile" % name); continue
        hits, samples = r
    else:	# protobuf read by hand: the string table names abratio
        raw = gzip.open(f).read()
        hits, samples = raw.count(b"abratio"), fields(raw).get(2, 0)
    print("RESULT %s abratio: %d sample rows, abratio named %d times" % (name, samples, hits))
    if want and not hits:
        bad("abratio is not in the profile of its own time (%s)" % name)
    if not want and hits:
        bad("abratio is in the profile of a time it did not run (%s)" % name)
    if name in ("before", "after") and not samples:
        bad("the %s range has no samples at all" % name)

# the byte cap
before = [l.strip() for l in open("%s/before-cap.txt" % t)]
after = sorted(os.path.join(x, n) for x in glob.glob("%s/capped/*/guests/*/samples" % t)
               for n in os.listdir(x) if n.startswith("w-"))
metrics = open("%s/cap.metrics" % t).read()
dropped = int(re.search(r'opvm_store_windows_dropped_total\{reason="max_store"\} (\d+)', metrics).group(1))
nbytes = int(re.search(r"^opvm_store_bytes (\d+)", metrics, re.M).group(1))
gone = sorted(set(before) - set(after))
end = lambda path: os.path.basename(path)[16:29]	# windows of two guests may share a name
capb = int(os.environ["CAPB"])
print("RESULT --max-store %d: %d windows before, %d after, %d dropped (metric %d), %d bytes kept"
      % (capb, len(before), len(after), len(gone), dropped, nbytes))
if not after:
    bad("the byte cap dropped every window")
if not gone or dropped != len(gone) or nbytes > capb:
    bad("the byte cap did not drop and count windows, or was exceeded")
if gone and after and max(end(n) for n in gone) > min(end(n) for n in after):
    bad("a window newer than a kept one was dropped: not oldest first")
sys.exit(0 if ok else 1)
EOF
echo "PASS: exporter --continuous"
