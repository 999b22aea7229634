#!/bin/bash
# A local user and a guest against what opvm writes outside its session
# (docs/usage.md, Security): a real TCG guest (cpuloop) under `opvm attach
# --qmp ... --channel SOCK`, one boot, five sessions.  Asserts:
#  1. ~/.cache/opvm/buildid a link to a victim directory (HOME in the
#     test's directory): refused with a message naming it; the victim's
#     mode, mtime and contents unchanged; the session still profiles;
#  2. $XDG_CACHE_HOME/opvm/buildid/guest owned by nobody, mode 777, every
#     xx in it a link to a victim directory: refused ("belongs to uid
#     65534"); nothing written through the links, the directory's mode and
#     owner unchanged;
#  3. the guest's kallsyms lies (tests/integration/hostile-relay.py
#     --ksyms-lie: _text and HELLO's anchor moved by 2 MiB, which moves the
#     KASLR slide): said in the summary, session.json and the report's
#     header and JSON warnings, and kernel samples keep opvm.ko's slide:
#     every one is named as the image's own System.map names it at HELLO's
#     slide (and its binaries are fetched by build-id into --fetch-cache);
#  4. each cached file replaced by a link to a victim file: no link counts
#     as cached, the victims' mtimes and contents unchanged;
#  5. -d under a directory others may write (mode 777, not sticky): the
#     session directory is not made, with a message.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ "$(id -u)" = 0 ] || skip "needs root: a directory of another user (chown nobody)"
id nobody >/dev/null 2>&1 || skip "no user nobody to own the foreign directory"
mk_tmp fetch-cache-hostile
T=$(cd "$T" && pwd)
export DEBUGINFOD_URLS=
DURATION=3
boot_channel_guest 384 "opvm.workload=cpuloop opvm.args=1000000000,60"

attach() {	# NAME CHANNEL [ARGS...]: status in $rc
	local name=$1 chan=$2
	shift 2
	"$OPVM" attach --qmp "$T/qmp" --channel "$chan" --name guest --duration $DURATION \
		-F 50 -d "$T/$name" "$@" > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
}
# snap DIR: every entry's path, type, mode, owner, size, mtime, and the
# files' contents, as one text to compare
snap() {
	find "$1" -printf '%p %y %m %u %s %T@\n' | sort
	find "$1" -type f -exec md5sum {} + | sort
}
victim() {	# DIR: a directory with one file, old times
	mkdir -p "$1" && chmod 755 "$1" && echo victim > "$1/keep" &&
		touch -d @978307200 "$1/keep" "$1"
}
sj() { echo "$T/$1/guests/guest/samples/current/session.json"; }
# has FILE TEXT: the (word-wrapped) output holds TEXT
has() { tr '\n' ' ' < "$1" | tr -s ' ' | grep -q "$2"; }
said() { tr '\n' ' ' < "$1" | tr -s ' ' | grep -o "$2" | head -n 1; }
ok=1
bad() { echo "FAIL: $*"; ok=0; }

# 1: the default cache a link
victim "$T/victim1"
mkdir -p "$T/h1/.cache/opvm"
ln -s "$T/victim1" "$T/h1/.cache/opvm/buildid"
before=$(snap "$T/victim1")
(unset XDG_CACHE_HOME; HOME="$T/h1" attach s1 "$T/chan"; exit $rc)
rc=$?
[ $rc = 0 ] || { cat "$T/s1.out" "$T/s1.err"; bad "1: the session failed ($rc)"; }
[ "$(snap "$T/victim1")" = "$before" ] || bad "1: the link's target was changed: $(snap "$T/victim1")"
has "$T/s1.err" "opvm/buildid is a symbolic link" ||
	{ cat "$T/s1.err"; bad "1: no refusal naming the link"; }
echo "RESULT 1 link at ~/.cache/opvm/buildid: exit $rc; $(said "$T/s1.err" 'buildid is a symbolic link[^;]*')"

# 2: the guest's directory another user's, 777, its xx links
victim "$T/victim2"
G=$T/x2/opvm/buildid/guest
mkdir -p "$G" && chmod 700 "$T/x2" "$T/x2/opvm" "$T/x2/opvm/buildid"
for i in $(seq 0 255); do ln -s "$T/victim2" "$G/$(printf %02x "$i")"; done
chmod 777 "$G" && chown nobody "$G"
before=$(snap "$T/victim2")
XDG_CACHE_HOME="$T/x2" attach s2 "$T/chan"
[ $rc = 0 ] || { cat "$T/s2.out" "$T/s2.err"; bad "2: the session failed ($rc)"; }
[ "$(snap "$T/victim2")" = "$before" ] || bad "2: written through the links: $(snap "$T/victim2")"
[ "$(stat -c '%a %U' "$G")" = "777 nobody" ] || bad "2: the directory was changed: $(stat -c '%a %U' "$G")"
has "$T/s2.out" "belongs to uid 65534" || { cat "$T/s2.out"; bad "2: no refusal in the summary"; }
echo "RESULT 2 another user's guest directory (777, xx links): exit $rc; $(said "$T/s2.out" 'guest belongs to uid [0-9]*[^:]*')"

# 3: a lying kallsyms, through the rewriting relay (and the cache filled).
# --introspect off: with guest memory read, the host asks the relay for the
# modules' symbols only, and vmlinux's _text never crosses the channel.
python3 tests/integration/hostile-relay.py --upstream "$T/chan" --listen "$T/relay" \
	--ksyms-lie 0x200000 --stats "$T/relay.stats" > "$T/relay.log" 2>&1 &
rpid=$!
CLEAN_PIDS="$rpid $CLEAN_PIDS"
for _ in $(seq 100); do [ -S "$T/relay" ] && break; sleep 0.1; done
DURATION=15 attach s3 "$T/relay" --fetch-cache "$T/good" --introspect off
kill "$rpid" 2>/dev/null; wait "$rpid" 2>/dev/null
[ $rc = 0 ] || { cat "$T/s3.out" "$T/s3.err"; bad "3: the session failed ($rc)"; }
grep -q "ksyms_moved=[1-9]" "$T/relay.stats" || fail "3: the relay moved no symbol: $(cat "$T/relay.stats")"
has "$T/s3.out" "kallsyms disagrees with opvm.ko's HELLO" || { cat "$T/s3.out"; bad "3: no warning in the summary"; }
# the truth: the same samples named with the image's own System.map at
# HELLO's slide
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/s3" \
	--system-map "$IMG/System.map" > "$T/truth.json" 2> "$T/truth.rerr" ||
	{ cat "$T/truth.rerr"; fail "3: opvm report --system-map"; }
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/s3" > "$T/s3.json" \
	2> "$T/s3.rerr" || { cat "$T/s3.rerr"; fail "3: opvm report"; }
"$OPVM" report -l --no-host-kernel --session-dir "$T/s3" > "$T/s3.txt" 2>&1 || fail "3: opvm report (text)"
sed -n '1,/^samples/p' "$T/s3.txt" | grep -q "warning: guest guest: the guest's kallsyms disagrees" ||
	{ head -n 20 "$T/s3.txt"; bad "3: no warning in the report's header"; }
python3 - "$T/truth.json" "$T/s3.json" "$(sj s3)" <<'PY' || ok=0
import json, sys
clean, lied, sj = (json.load(open(p)) for p in sys.argv[1:4])
def kern(r):
    out = {}
    for s in r["symbols"]:
        if s.get("image") in ("vmlinux", "[kernel.kallsyms]") and s.get("symbol"):
            out[s["symbol"]] = out.get(s["symbol"], 0) + s["samples"]
    return out
kc, kl = kern(clean), kern(lied)
tot = sum(kl.values())
same = sum(v for k, v in kl.items() if k in kc)
top = lambda d: max(d, key=d.get) if d else None
mism = sj["fetch"]["ksyms"].get("slide_mismatch", 0)
warned = [w for w in lied.get("warnings", []) if "kallsyms disagrees" in w]
same = sum(min(v, kc.get(k, 0)) for k, v in kl.items())
print("RESULT 3 lying kallsyms (_text, anchor +2 MiB): %d kernel samples, %d (%.1f %%) named "
      "as with System.map at HELLO's slide; top %s (System.map: %s); session.json "
      "slide_mismatch %s; report warning: %s"
      % (tot, same, 100.0 * same / tot if tot else 0, top(kl), top(kc), mism, bool(warned)))
ok = True
# the floor only says the kernel was sampled (15 on a loaded host, where
# the gdbstub round trip grows ~100-fold); the verdict is kl == kc, every
# kernel sample named as System.map names it, which any count judges
for name, cond in (("kernel samples", tot >= 5),
                   ("the module's slide kept (every kernel sample named as with System.map)",
                    kl == kc),
                   ("counted in session.json", mism >= 1),
                   ("warned in the report's JSON", bool(warned))):
    if not cond:
        print("FAIL: 3: %s" % name); ok = False
sys.exit(0 if ok else 1)
PY

files=$(find "$T/good/guest" -type f | sort)
[ -n "$files" ] || fail "3: the session fetched no binary"

# 4: links at the cached files' own names
victim "$T/victim4"
k=0
for f in $files; do
	k=$((k + 1))
	echo "victim $k" > "$T/victim4/f$k"
	touch -d @978307200 "$T/victim4/f$k"
	rm "$f" && ln -s "$T/victim4/f$k" "$f"
done
touch -d @978307200 "$T/victim4"
before=$(snap "$T/victim4")
attach s4 "$T/chan" --fetch-cache "$T/good"
[ $rc = 0 ] || { cat "$T/s4.out" "$T/s4.err"; bad "4: the session failed ($rc)"; }
[ "$(snap "$T/victim4")" = "$before" ] || bad "4: the links' targets were touched: $(snap "$T/victim4")"
cached=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["fetch"]["binaries"]["cached"])' "$(sj s4)")
[ "$cached" = 0 ] || bad "4: $cached links counted as cached binaries"
echo "RESULT 4 links at $k cached files' names: $cached taken as cached, targets untouched: $([ "$(snap "$T/victim4")" = "$before" ] && echo yes || echo no)"

# 5: a session directory under a directory others may write
mkdir "$T/shared" && chmod 777 "$T/shared"
"$OPVM" attach --qmp "$T/qmp" --channel "$T/chan" --name guest --duration 1 \
	-d "$T/shared/new/s5" > "$T/s5.out" 2> "$T/s5.err"
rc=$?
[ $rc != 0 ] || bad "5: a session was made under a directory others may write"
[ ! -e "$T/shared/new" ] || bad "5: $T/shared/new was made"
has "$T/s5.err" "shared is writable by others" || { cat "$T/s5.err"; bad "5: no message"; }
echo "RESULT 5 -d under a world-writable directory: exit $rc; $(said "$T/s5.err" 'shared is writable by others[^:]*')"
[ $ok = 1 ] || exit 1
echo PASS
