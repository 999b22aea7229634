#!/bin/bash
# Names for a guest's libc from a real debuginfod, with no opvm.ko and no
# binary on the host.  The test image (QEMU TCG) runs libcmix with
# opvm.kmod=0 and --no-image-symbols: introspection reads the build-ids
# from the processes' mappings, nothing fetches a binary.  A real
# `debuginfod` (Debian's package) serves, on loopback, a directory holding
# Debian's libc6-dbg .deb of the image's libc (downloaded once into
# $BUILD/debuginfod-debs).  Every report runs with the host's
# /usr/lib/debug hidden (a mount namespace), so debuginfod is the only
# place the names can come from.  Asserts:
#  - control, no DEBUGINFOD_URLS: libc's samples named only by its exported
#    symbols read from guest memory (under half: its memset is local);
#  - with the server: >= 99 % of libc's samples named, and per symbol the
#    same counts as the binary itself (--guest-root) with the same debug
#    file attached (the debug file's rebuilt layout is the binary's); JSON
#    "debuginfod" counts the file found, none refused;
#  - a second report with the same client cache makes no request;
#  - hostile servers (tests/integration/debuginfod-hostile.py), each with a
#    fresh cache: one that serves another build's file (refused_build_id),
#    one that streams 64 MiB with no length under DEBUGINFOD_MAXSIZE=8 MB
#    (refused_size), one that never answers under DEBUGINFOD_TIMEOUT=3
#    (timed_out 1, one request only, the other build-ids not asked; the
#    server sees at most 3 connections: libdebuginfod's own retries): each
#    refused and counted, said in the warnings, libc named as the control, and the
#    report complete (the control's total);
#  - the kernel: session.json kernel.build_id (VMCOREINFO's BUILD-ID, read
#    by introspection) is the image's vmlinux's; without the kallsyms
#    introspection sent, the report asks debuginfod for vmlinux by it
#    (a server in debuginfod's layout serving the image's vmlinux).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
command -v debuginfod >/dev/null || skip "debuginfod is not installed (scripts/install-deps.sh)"
command -v bsdtar >/dev/null || skip "bsdtar is not installed (libarchive-tools, scripts/install-deps.sh)"
command -v curl >/dev/null || skip "curl is not installed"
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
mk_tmp debuginfod-guest
S=$T/session

# the image's libc is the host's (images/mkroot.sh)
libc=$IMG/root/lib/x86_64-linux-gnu/libc.so.6
lbid=$(readelf -n "$libc" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$lbid" ] || fail "no build-id in $libc"
ver=$(dpkg-query -W -f '${Version}' libc6) || skip "cannot tell the host's libc6 version"
DEBS=$BUILD/debuginfod-debs
mkdir -p "$DEBS"
if ! ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb >/dev/null 2>&1; then
	log=$PWD/$T/apt.log
	(cd "$DEBS" && apt-get download "libc6-dbg=$ver" > "$log" 2>&1) ||
		skip "apt cannot download libc6-dbg=$ver: $(tail -1 "$T/apt.log")"
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
P=$(port)
debuginfod -U -p "$P" -d "$T/db.sqlite" -t 0 -g 0 "$DEBS" > "$T/dbgd.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"

# a private, empty fetch cache: the shared one may hold this libc from
# another session of a guest named "guest" (its .dynsym would name some)
DEBUGINFOD_URLS= "$OPVM" run --workload "libcmix:4" --append "quiet opvm.kmod=0" \
	--no-image-symbols --fetch-cache "$PWD/$T/fc" -F 200 -d "$S" > "$T/run.out" 2> "$T/run.err" ||
	{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
grep -aq "OPVM-TRUTH exit workload=libcmix rc=0" "$S/guests/guest/console.log" ||
	fail "libcmix did not finish"

# the server's first scan of the .deb files (about 30 s once here)
for _ in $(seq 240); do
	c=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/buildid/$lbid/debuginfo")
	[ "$c" = 200 ] && break
	sleep 0.5
done
[ "$c" = 200 ] || { tail "$T/dbgd.log"; fail "debuginfod never served libc's debug file ($c)"; }

# rep NAME [env...]: opvm report -l as JSON with the host's debug files hidden
rep() {
	local n=$1
	shift
	env "$@" unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
		"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" \
		> "$T/$n.json" 2> "$T/$n.err" || { cat "$T/$n.err"; fail "report $n"; }
}
reqs() { grep -c 'UA:elfutils.*GET /buildid/' "$T/dbgd.log"; }
rep control DEBUGINFOD_URLS=
rep real DEBUGINFOD_URLS="http://127.0.0.1:$P" DEBUGINFOD_CACHE_PATH="$T/cache"
n1=$(reqs)
rep again DEBUGINFOD_URLS="http://127.0.0.1:$P" DEBUGINFOD_CACHE_PATH="$T/cache"
n2=$(reqs)
# the truth: the binary itself, its debug file attached (host's /usr/lib/debug
# hidden, so from the same server's cache)
env DEBUGINFOD_URLS="http://127.0.0.1:$P" DEBUGINFOD_CACHE_PATH="$T/cache" unshare -m sh -c \
	'mount -t tmpfs none /usr/lib/debug && exec "$@"' x "$OPVM" report -l \
	--format json --no-host-kernel --session-dir "$S" --guest-root "$IMG/root" \
	> "$T/truth.json" 2> "$T/truth.err" || { cat "$T/truth.err"; fail "report truth"; }

H=$(dirname "$0")/debuginfod-hostile.py
hostile() {	# hostile MODE [env...]
	local m=$1 hp
	shift
	hp=$(port)
	python3 "$H" "$m" "$hp" "$other" > "$T/h-$m.log" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 50); do
		python3 -c "import socket; socket.create_connection(('127.0.0.1', $hp))" 2>/dev/null && break
		sleep 0.1
	done
	rep "h-$m" DEBUGINFOD_URLS="http://127.0.0.1:$hp" DEBUGINFOD_CACHE_PATH="$T/cache-$m" "$@"
}
# another build's debug file, from the same package
dpkg-deb -x "$(ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb | head -1)" "$T/deb"
other=$(find "$T/deb/usr/lib/debug/.build-id" -name '*.debug' -size +100k | grep -v "/${lbid:2}.debug" | head -1)
[ -n "$other" ] || fail "no other debug file in libc6-dbg"
hostile other
hostile huge DEBUGINFOD_MAXSIZE=8000000
hostile silent DEBUGINFOD_TIMEOUT=3
requests_silent=$(grep -c "^GET /buildid/" "$T/h-silent.log")

# The kernel: VMCOREINFO's BUILD-ID (introspection) in session.json, the
# truth from the image's vmlinuz (its xz payload's notes); with the
# kallsyms introspection sent removed, the report asks debuginfod for
# vmlinux by it: a server in debuginfod's layout serves the image's
# vmlinux (no symbols: Debian strips it), which is taken as the kernel's
# file (its build-id checked) and found to have no symbols.
kbid=$(python3 - "$IMG/vmlinuz" "$T/vmlinux" <<'PY'
import lzma, subprocess, sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"\xfd7zXZ\x00")
if i >= 0:
    open(sys.argv[2], "wb").write(lzma.LZMADecompressor().decompress(d[i:]))
    out = subprocess.run(["readelf", "-n", sys.argv[2]], capture_output=True, text=True).stdout
    print("".join(l.split()[-1] for l in out.splitlines() if "Build ID" in l))
PY
)
cp -a "$S" "$T/nok" && rm -f "$T/nok/guests/guest/kallsyms"
if [ -n "$kbid" ]; then
	mkdir -p "$T/ksrv/buildid/$kbid"
	cp "$T/vmlinux" "$T/ksrv/buildid/$kbid/debuginfo"
	kp=$(port)
	python3 -m http.server "$kp" --bind 127.0.0.1 --directory "$T/ksrv" > "$T/k.log" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 50); do
		curl -s -o /dev/null "http://127.0.0.1:$kp/" && break
		sleep 0.1
	done
	DEBUGINFOD_URLS="http://127.0.0.1:$kp" DEBUGINFOD_CACHE_PATH="$T/cache-k" unshare -m sh -c \
		'mount -t tmpfs none /usr/lib/debug && exec "$@"' x "$OPVM" report -l --format json \
		--no-host-kernel --session-dir "$T/nok" > "$T/k.json" 2> "$T/k.err" ||
		{ cat "$T/k.err"; fail "report without kallsyms"; }
fi

python3 - "$T" "$n1" "$n2" "$requests_silent" "$kbid" <<'PY' || exit 1
import json, sys
T, n1, n2, nsil, kbid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def load(n): return json.load(open("%s/%s.json" % (T, n)))
def libc(j):
    rows = [r for r in j["symbols"] if r["image"].endswith("/libc.so.6") or r["image"] == "libc.so.6"]
    tot = sum(r["samples"] for r in rows)
    named = sum(r["samples"] for r in rows if r["symbol"] and not r["symbol"].startswith("("))
    return tot, named, {r["symbol"]: r["samples"] for r in rows}
ok = True
def check(cond, msg):
    global ok
    print(("RESULT " if cond else "FAIL: ") + msg)
    ok = ok and cond
c, real, truth = load("control"), load("real"), load("truth")
ct, cn, _ = libc(c)
rt, rn, rsyms = libc(real)
tt, tn, tsyms = libc(truth)
# the control names only what libc exports, read from guest memory (its
# hot memset variants are local symbols: not there).  The floor only says
# libc was sampled (a busy host's gdbstub round trip leaves ~20 where an
# idle one takes hundreds): what tells a leak of the debug file (~all
# named) from .dynsym alone (~none: 0 of 21 on a loaded run) is the share,
# and 10 samples tell them apart.
check(ct >= 10 and cn < 0.5 * ct,
      "control (no DEBUGINFOD_URLS): libc %d of %d samples named (by its .dynsym in memory)"
      % (cn, ct))
check(rt == ct and rn >= 0.99 * rt,
      "real debuginfod: libc %d of %d samples named (%.1f %%)" % (rn, rt, 100.0 * rn / max(rt, 1)))
check(rsyms == tsyms, "per symbol the same as the binary with its debug file: %s" %
      sorted(rsyms.items(), key=lambda x: -x[1])[:4])
d = real.get("debuginfod", {})
check(d.get("found", 0) >= 1 and d.get("refused_build_id", 1) == 0 and d.get("refused_size", 1) == 0,
      "real debuginfod counters: %s" % d)
check(n1 >= 1 and n2 == n1, "requests: %d for the first report, %d more for the second" % (n1, n2 - n1))
for m, key in (("other", "refused_build_id"), ("huge", "refused_size"), ("silent", "timed_out")):
    j = load("h-" + m)
    t, n, _ = libc(j)
    d = j.get("debuginfod", {})
    w = [x for x in j["warnings"] if x.startswith("debuginfod:")]
    good = d.get(key, 0) >= 1 and n == cn and j["total_samples"] == c["total_samples"] and len(w) == 1
    if m == "silent":
        # libdebuginfod itself tries DEBUGINFOD_RETRY_LIMIT (2) more times
        good = good and d.get("timed_out") == 1 and d.get("requests") == 1 and nsil <= 3 \
            and d.get("not_asked_after_timeout", 0) >= 1
    check(good, "hostile %s: libc %d of %d named, total %d (control %d), %s; %s%s" %
          (m, n, t, j["total_samples"], c["total_samples"], d, w,
           "; %d connections" % nsil if m == "silent" else ""))
sj = json.load(open(T + "/session/guests/guest/samples/current/session.json"))
have = sj.get("kernel", {}).get("build_id")
if not kbid:
    print("SKIP part: no xz payload in the image's vmlinuz to read its build-id from")
else:
    check(have == kbid, "kernel build-id from VMCOREINFO %s, the image's vmlinux %s" % (have, kbid))
    kl = open(T + "/k.log").read()
    d = json.load(open(T + "/k.json")).get("debuginfod", {})
    check("GET /buildid/%s/debuginfo HTTP/1.1\" 200" % kbid in kl and d.get("found") == 1,
          "without kallsyms, vmlinux asked of debuginfod by that build-id: %s" % d)
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "see above"
echo PASS
