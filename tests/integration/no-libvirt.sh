#!/bin/bash
# opvm-test: alone (one libvirtd for the host's domains)
# Without libvirt installed (a mount namespace puts an empty file over
# libvirt.so.0), each command that asks for it says what to install and its
# own next step:
#  1. `opvm top --once` (text and JSON) says that the QEMU processes in /proc
#     are still listed and that --no-libvirt keeps to them (top has no
#     --qmp or --pid), never attach's options;
#  2. `opvm attach DOMAIN` exits 1 and says --qmp SOCKET or --pid PID.
# No guest is needed; about 2 s.
. "$(dirname "$0")/qemu-common.bash"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
lib=$(ldconfig -p | awk '$1 == "libvirt.so.0" { print $NF; exit }')
[ -n "$lib" ] || skip "libvirt.so.0 is not installed: nothing to hide"
unshare -m true 2>/dev/null || skip "no mount namespace here (unshare -m needs root)"
# a sanitized build links libvirt (Makefile): it would not start at all
ldd "$OPVM" | grep -q 'libvirt\.so' && skip "$OPVM links libvirt (a SAN= build): nothing to hide"
mk_tmp no-libvirt
T=$(realpath "$T")
: > "$T/empty"
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

# hidden CMD...: CMD with libvirt.so.0 hidden; its output in $T/out
hidden() {
	unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh \
		"$T/empty" "$lib" timeout -k 1 30 "$@" > "$T/out" 2>&1
}

hidden "$OPVM" top --once -d 0.2
rc=$?
msg=$(tr -s '\n ' '  ' < "$T/out")	# as one line: it is wrapped
echo "RESULT top --once without libvirt: exit $rc: $(grep -A3 '^libvirt:' "$T/out")"
[ "$rc" = 0 ] || bad "top --once exited $rc"
case "$msg" in *"apt-get install libvirt0); the QEMU processes in /proc are still listed (--no-libvirt"*) ;;
	*) bad "top does not say what still works without libvirt" ;;
esac
case "$msg" in *"--qmp"*|*"--pid"*) bad "top offers attach's options" ;; esac
awk 'length > 80 { exit 1 }' "$T/out" || bad "top --once has lines over 80 columns"

hidden "$OPVM" top --once -d 0.2 --format json
python3 - "$T/out" <<'PY' || bad "top's JSON libvirt_error is not top's"
import json, sys
e = json.load(open(sys.argv[1]))["libvirt_error"]
sys.exit(0 if "apt-get install libvirt0" in e and "--no-libvirt" in e and "--qmp" not in e else 1)
PY

hidden "$OPVM" attach some-domain --duration 1 -d "$T/s"
rc=$?
msg=$(tr -s '\n ' '  ' < "$T/out")
echo "RESULT attach DOMAIN without libvirt: exit $rc: $msg"
[ "$rc" = 1 ] || bad "attach exited $rc (wanted 1)"
case "$msg" in *"apt-get install libvirt0), or attach without libvirt: --qmp SOCKET"*"--pid PID"*) ;;
	*) bad "attach does not say what to install and how to attach without libvirt" ;;
esac
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
