#!/bin/bash
# Full names with no host setup, from the guest's own debug files: the
# Debian disk guest built with libc6-dbg and python3.11-dbg installed
# (make images-disk DISK_DBG=1 BUILD=$BUILD/dbg, or OPVM_TEST_DISK_DBG=DIR),
# opvm.ko and its relay on, `opvm run --disk` with an empty fetch cache and
# no symbol flag, workload timed-python.  Reports run with the host's
# /usr/lib/debug hidden (a mount namespace) and no DEBUGINFOD_URLS.
# Asserts:
#  - the relay sent the debug files of libc and python3.11 (session.json
#    fetch.binaries.debug_files: files >= 2, none refused);
#  - >= 99 % of python3.11's and of libc's samples are named;
#  - control (the fetched .debug files removed): fewer named, .dynsym's
#    names only.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
DISK=${OPVM_TEST_DISK_DBG:-$BUILD/dbg/images-disk}
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
[ -f "$DISK/disk.img" ] ||
	skip "no disk guest with debug files in $DISK: make images-disk DISK_DBG=1 BUILD=$BUILD/dbg (or OPVM_TEST_DISK_DBG=DIR)"
mk_tmp disk-guest-debug-files
img=$(realpath "$DISK/disk.img")
C=$PWD/$T/fc
DEBUGINFOD_URLS= timeout 900 "$OPVM" run --disk "$img" --fetch-cache "$C" \
	--workload timed-python -F 50 -d "$T/s" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run --disk failed"; }
rep() {	# rep NAME
	DEBUGINFOD_URLS= unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
		"$OPVM" report -l --format json --no-host-kernel -d "$T/s" > "$T/$1.json" \
		2> "$T/$1.err" || { cat "$T/$1.err"; fail "report $1"; }
}
rep with
find "$C" -name '*.debug' > "$T/debugs"
while read -r f; do mv "$f" "$f.moved"; done < "$T/debugs"
rep control
python3 - "$T" <<'PY' || exit 1
import json, sys
T = sys.argv[1]
ok = True
def check(cond, msg):
    global ok
    print(("RESULT " if cond else "FAIL: ") + msg)
    ok = ok and cond
sj = json.load(open(T + "/s/guests/guest/samples/current/session.json"))
d = sj["fetch"]["binaries"].get("debug_files", {})
check(d.get("files", 0) >= 2 and d.get("refused") == 0, "debug files from the guest: %s" % d)
def share(n, suffix):
    rows = [r for r in json.load(open("%s/%s.json" % (T, n)))["symbols"]
            if r["image"].endswith(suffix)]
    tot = sum(r["samples"] for r in rows)
    named = sum(r["samples"] for r in rows if r["symbol"] and not r["symbol"].startswith("("))
    return tot, named
for suffix in ("/python3.11", "/libc.so.6"):
    wt, wn = share("with", suffix)
    ct, cn = share("control", suffix)
    check(wt >= 20 and wn >= 0.99 * wt, "%s: %d of %d samples named with the guest's debug "
          "files (%.1f %%); .dynsym only: %d of %d" % (suffix, wn, wt, 100.0 * wn / max(wt, 1),
                                                      cn, ct))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "see above"
echo PASS
