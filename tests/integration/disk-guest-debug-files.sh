#!/bin/bash
# Full names with no host setup, from the guest's own debug files: the
# Debian disk guest built with libc6-dbg and python3.11-dbg installed
# (make images-disk DISK_DBG=1 BUILD=$BUILD/dbg, or OPVM_TEST_DISK_DBG=DIR),
# opvm.ko and its relay on, `opvm run --disk` with an empty fetch cache and
# no symbol flag, workload python (opvm-wl's pure-Python loop, busy until
# opvm quits the guest after DBGF_SECS, 150 s from power-on: the relay
# paces the debug files, python3.11's is 11 MB, and a timed workload that
# powers the guest off after a second of Python ended the session before
# it came).  The pace is 1/1000 of the time plus the guest's idle CPU time
# (docs/guest.md): python busy on one of two vCPUs leaves the other idle,
# and its idle time paces them (measured 2026-12-06 under TCG on a loaded
# 2-core host, the cache watched: libc's in 72 s from opvm's start,
# python3.11's in 94 s, 24 s after the host first asked); a guest busy on
# every vCPU would wait minutes (30 to 40 s a MB).  Reports run with the
# host's /usr/lib/debug hidden (a mount
# namespace) and no DEBUGINFOD_URLS.  A sample is named by a symbol that
# is not an eh_frame group (IMAGE+0xADDR) nor "(...)"; a Python frame is
# a name (most of python3.11's samples: printed apart).  Asserts:
#  - the relay sent the debug files of libc's and python3.11's build-ids
#    (read from the image), none refused;
#  - >= 99 % of python3.11's and of libc's samples are named, 20 at least;
#  - control (the fetched .debug files removed, .dynsym's names only):
#    libc's local functions (memset's and strcmp's variants) go unnamed.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
DISK=${OPVM_TEST_DISK_DBG:-$BUILD/dbg/images-disk}
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
[ -f "$DISK/disk.img" ] ||
	skip "no disk guest with debug files in $DISK: make images-disk DISK_DBG=1 BUILD=$BUILD/dbg (or OPVM_TEST_DISK_DBG=DIR)"
command -v debugfs >/dev/null 2>&1 || skip "debugfs is not installed (e2fsprogs)"
mk_tmp disk-guest-debug-files
img=$(realpath "$DISK/disk.img")
C=$PWD/$T/fc
bid_of() {	# bid_of PATH: its build-id, from the image (read-only)
	debugfs -R "dump -p $1 $T/bin.$$" "$img" > /dev/null 2>&1
	readelf -n "$T/bin.$$" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p'
	rm -f "$T/bin.$$"
}
LBID=$(bid_of /usr/lib/x86_64-linux-gnu/libc.so.6)
PBID=$(bid_of /usr/bin/python3.11)
[ -n "$LBID" ] && [ -n "$PBID" ] || fail "no build-ids for libc.so.6 / python3.11 in $img"
DEBUGINFOD_URLS= timeout 900 "$OPVM" run --disk "$img" --fetch-cache "$C" \
	--workload python --duration "${DBGF_SECS:-150}" -F 50 -d "$T/s" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run --disk failed"; }
for b in "$LBID" "$PBID"; do
	[ -f "$C/guest/${b:0:2}/${b:2}.debug" ] && echo "RESULT debug file of $b: $(stat -c %s "$C/guest/${b:0:2}/${b:2}.debug") bytes"
done
rep() {	# rep NAME
	DEBUGINFOD_URLS= unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
		"$OPVM" report -l --format json --no-host-kernel -d "$T/s" > "$T/$1.json" \
		2> "$T/$1.err" || { cat "$T/$1.err"; fail "report $1"; }
}
rep with
find "$C" -name '*.debug' > "$T/debugs"
while read -r f; do mv "$f" "$f.moved"; done < "$T/debugs"
rep control
python3 - "$T" "$C/guest" "$LBID" "$PBID" <<'PY' || exit 1
import json, os, sys
T, CG = sys.argv[1:3]
ok = True
def check(cond, msg):
    global ok
    print(("RESULT " if cond else "FAIL: ") + msg)
    ok = ok and cond
sj = json.load(open(T + "/s/guests/guest/samples/current/session.json"))
d = sj["fetch"]["binaries"].get("debug_files", {})
got = {b: os.path.exists("%s/%s/%s.debug.moved" % (CG, b[:2], b[2:])) for b in sys.argv[3:5]}
check(all(got.values()) and d.get("refused") == 0,
      "debug files from the guest: %s; libc's and python3.11's: %s" % (d, got))
def named(r):
    s = r["symbol"]
    return bool(s) and not r.get("eh_frame") and not s.startswith("(")
def share(n, suffix):
    rows = [r for r in json.load(open("%s/%s.json" % (T, n)))["symbols"]
            if r["image"].endswith(suffix)]
    tot = sum(r["samples"] for r in rows)
    k = sum(r["samples"] for r in rows if named(r))
    py = sum(r["samples"] for r in rows if named(r) and r.get("python"))
    return tot, k, py
for suffix in ("/python3.11", "/libc.so.6"):
    wt, wn, wp = share("with", suffix)
    ct, cn, _ = share("control", suffix)
    check(wt >= 20 and wn >= 0.99 * wt, "%s: %d of %d samples named with the guest's debug "
          "files (%.1f %%; %d by Python frames); .dynsym only: %d of %d" % (
              suffix, wn, wt, 100.0 * wn / max(wt, 1), wp, cn, ct))
    if suffix == "/libc.so.6":
        check(cn < wn, "libc: the control names fewer: %d against %d" % (cn, wn))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "see above"
echo PASS
