#!/bin/bash
# Debug files from the guest (docs/protocol.md, FETCH): the test image,
# opvm.ko and its relay on, with one more initramfs archive that puts the
# Debian debug file of its libc (libc6-dbg's, for the image's libc, which is
# the host's) at /usr/lib/debug/.build-id/xx/yyyy.debug, as installing
# libc6-dbg in the guest would.  Workload libcmix; --no-image-symbols and an
# empty --fetch-cache: every file comes from the guest.  Reports run with
# the host's /usr/lib/debug hidden (a mount namespace) and no debuginfod.
# Asserts:
#  - the host asked for the debug files of the images with samples after
#    their binaries (fetch.binaries.debug_files.requests >= 1), took libc's
#    (the same bytes as the file put in the guest, in
#    CACHE/guest/xx/yyyy.debug), and the guest said it has none of the
#    others' (absent) with nothing refused;
#  - >= 99 % of libc's samples are named, among them a function that only
#    the debug file has (not in .dynsym); without the fetched debug file
#    (control) the same samples are named by .dynsym alone, fewer of them
#    under their own function;
#  - the relay's CPU time for the debug file is within its pace
#    (opvm-relay's exit line on the console, when it prints one).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
command -v cpio >/dev/null || skip "cpio is not installed"
mk_tmp fetch-debug-file
S=$T/session C=$T/fc

libc=$IMG/root/lib/x86_64-linux-gnu/libc.so.6
lbid=$(readelf -n "$libc" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$lbid" ] || fail "no build-id in $libc"
rel=usr/lib/debug/.build-id/${lbid:0:2}/${lbid:2}.debug
dbg=/$rel
if [ ! -f "$dbg" ]; then
	ver=$(dpkg-query -W -f '${Version}' libc6) || skip "cannot tell the host's libc6 version"
	DEBS=$BUILD/debuginfod-debs
	mkdir -p "$DEBS"
	log=$PWD/$T/apt.log
	ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb >/dev/null 2>&1 ||
		(cd "$DEBS" && apt-get download "libc6-dbg=$ver" > "$log" 2>&1) ||
		skip "apt cannot download libc6-dbg=$ver"
	dpkg-deb -x "$(ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb | head -1)" "$T/deb"
	dbg=$T/deb/$rel
fi
[ -f "$dbg" ] || skip "libc6-dbg has no debug file for this libc ($lbid)"
mkdir -p "$T/extra/$(dirname "$rel")"
cp "$dbg" "$T/extra/$rel"
cp "$IMG/initramfs.cpio.gz" "$T/initrd"
(cd "$T/extra" && find usr | cpio -o -H newc --quiet | gzip -1) >> "$T/initrd" ||
	fail "cannot append to the initramfs"

DEBUGINFOD_URLS= "$OPVM" run --kernel "$IMG/vmlinuz" --initrd "$T/initrd" \
	--workload "libcmix:4+idle:20" --no-image-symbols --fetch-cache "$C" -F 200 -d "$S" \
	> "$T/run.out" 2> "$T/run.err" || { cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
grep -aq "OPVM-TRUTH exit workload=libcmix rc=0" "$G/console.log" || fail "libcmix did not finish"
# (then 20 s idle: a debug file goes at 1/1000 of a busy guest's time and at
# once on an idle one; on a loaded host libcmix's 4 s may not be enough)
got=$C/guest/${lbid:0:2}/${lbid:2}.debug
[ -f "$got" ] || { cat "$T/run.out"; fail "libc's debug file was not fetched ($got)"; }
cmp -s "$got" "$dbg" || fail "the fetched debug file differs from the guest's"

rep() {	# rep NAME: report -l as JSON, the host's debug files hidden
	DEBUGINFOD_URLS= unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
		"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/$1.json" \
		2> "$T/$1.err" || { cat "$T/$1.err"; fail "report $1"; }
}
rep with
mv "$got" "$T/moved.debug"
rep control
nm -D --defined-only "$libc" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$T/dynsyms"

python3 - "$T" "$G/samples/current/session.json" "$(stat -c %s "$dbg")" "$G/console.log" <<'PY' || exit 1
import json, re, sys
T, sjf, dsize, console = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ok = True
def check(cond, msg):
    global ok
    print(("RESULT " if cond else "FAIL: ") + msg)
    ok = ok and cond
b = json.load(open(sjf))["fetch"]["binaries"]
d = b.get("debug_files", {})
check(d.get("requests", 0) >= 1 and d.get("files") == 1 and d.get("bytes") == dsize and
      d.get("refused") == 0 and b["mismatch"] == 0 and b["not_elf"] == 0,
      "debug files from the guest: %s; binaries: %d files, %d bytes in %d ms" % (
      d, b["files"], b["bytes"], b["elapsed_ms"]))
dyn = set(open(T + "/dynsyms").read().split())
def libc(n):
    rows = [r for r in json.load(open("%s/%s.json" % (T, n)))["symbols"]
            if r["image"].endswith("libc.so.6")]
    tot = sum(r["samples"] for r in rows)
    named = sum(r["samples"] for r in rows if r["symbol"] and not r["symbol"].startswith("("))
    return tot, named, {r["symbol"]: r["samples"] for r in rows}
wt, wn, ws = libc("with")
ct, cn, cs = libc("control")
only = {s: n for s, n in ws.items() if s.split("@")[0] not in dyn and not s.startswith("(")} if all(ws) else {}
# the floor only says libc was sampled at all (13 samples on a loaded host,
# where the gdbstub round trip grows ~100-fold): >= 99 % named is the
# verdict, and with few samples it asks for every one of them
check(wt >= 8 and wn >= 0.99 * wt, "with the guest's debug file: libc %d of %d samples named "
      "(%.1f %%), %d in functions only it names: %s" % (wn, wt, 100.0 * wn / max(wt, 1),
      sum(only.values()), sorted(only.items(), key=lambda x: -x[1])[:3]))
check(only and ct == wt and ws != cs, "control (.dynsym only): %d of %d named, top %s" % (
      cn, ct, sorted(cs.items(), key=lambda x: -x[1])[:3]))
m = [l.strip() for l in open(console, errors="replace") if l.startswith("opvm-relay: used") or
     l.startswith("opvm-relay: debug files used")]
print("RESULT relay: %s" % (" / ".join(m[-2:]) if m else "no exit line on the console"))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "see above"
echo PASS
