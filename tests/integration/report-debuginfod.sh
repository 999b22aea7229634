#!/bin/bash
# Binaries by build-id from debuginfod: a local HTTP server in debuginfod's
# layout (/buildid/HEX/executable, /buildid/HEX/debuginfo) serves the
# fixture's program, stripped, and its debug info; the guest root has no
# copy.  `opvm report -l` must name its functions (symbols from the debug
# info) and `annotate --source` find the hot line.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
fixture_tmp report-debuginfod
srv_pid=""
cleanup() {
	[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
make_fixture "$tmp"

bid=$(readelf -n "$root/usr/bin/prog" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$bid" ] || { echo "FAIL: no build-id in the fixture"; exit 1; }
mkdir -p "$tmp/srv/buildid/$bid" "$tmp/emptyroot"
strip -o "$tmp/srv/buildid/$bid/executable" "$root/usr/bin/prog"
objcopy --only-keep-debug "$root/usr/bin/prog" "$tmp/srv/buildid/$bid/debuginfo"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$tmp/srv" > "$tmp/http.log" 2>&1 &
srv_pid=$!
for _ in $(seq 50); do
	python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break
	sleep 0.1
done

unset DEBUGINFOD_PROGRESS
export DEBUGINFOD_URLS="http://127.0.0.1:$port" DEBUGINFOD_CACHE_PATH="$tmp/cache"
common=(--session-dir "$session" --guest-root "t1=$tmp/emptyroot" --no-host-kernel guest:t1 image:/usr/bin/prog)
"$OPVM" report -l --format json "${common[@]}" > "$tmp/r.json" || { echo "FAIL: report"; exit 1; }
python3 - "$tmp/r.json" <<'PY' || exit 1
import json, sys
rows = json.load(open(sys.argv[1]))["symbols"]
names = {r["symbol"]: r["samples"] for r in rows}
print("RESULT via debuginfod:", names)
ok = names.get("func_b") == 1100 and names.get("func_a") == 450
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || { echo "FAIL: symbols did not come from debuginfod"; cat "$tmp/http.log"; exit 1; }
"$OPVM" annotate --source func_b --source-dir tests/golden/fixtures "${common[@]}" > "$tmp/a.txt" 2> "$tmp/a.err" ||
	{ cat "$tmp/a.err"; echo "FAIL: annotate"; exit 1; }
line=$(grep "HOT_B" "$tmp/a.txt")
echo "RESULT hot source line: $line"
[ "$(echo "$line" | awk '{print $1}')" = 1000 ] || { cat "$tmp/a.txt"; echo "FAIL: hot line"; exit 1; }
grep -c "GET /buildid/$bid/" "$tmp/http.log" | sed 's/^/RESULT debuginfod requests: /'

# Without libdebuginfod (a mount namespace puts an empty file over it), the
# same report says so once, with what to install, in text and in JSON's
# warnings, instead of behaving as if DEBUGINFOD_URLS were unset.
lib=$(ldconfig -p | awk '$1 == "libdebuginfod.so.1" { print $NF; exit }')
: > "$tmp/empty"
if [ -z "$lib" ] || ! unshare -m true 2>/dev/null; then
	echo "SKIP part: no libdebuginfod.so.1 to hide or no mount namespace (unshare -m)"
else
	unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && "$@" > "$0.txt" &&
		"$@" --format json > "$0.json"' "$tmp/nolib" "$tmp/empty" "$lib" \
		"$OPVM" report -l "${common[@]}" || { echo "FAIL: report without libdebuginfod"; exit 1; }
	msg=$(tr -s '\n ' '  ' < "$tmp/nolib.txt")	# as one line: it is wrapped
	echo "RESULT without libdebuginfod: $(grep -A2 libdebuginfod "$tmp/nolib.txt" | head -3)"
	[ "$(grep -c "^warning: DEBUGINFOD_URLS" "$tmp/nolib.txt")" = 1 ] ||
		{ cat "$tmp/nolib.txt"; echo "FAIL: not one warning in the text report"; exit 1; }
	case "$msg" in *"apt-get install libdebuginfod1) or unset DEBUGINFOD_URLS"*) ;; *)
		echo "FAIL: the warning does not say what to do"; exit 1 ;;
	esac
	python3 - "$tmp/nolib.json" <<'PY' || { echo "FAIL: not in JSON's warnings"; exit 1; }
import json, sys
w = [x for x in json.load(open(sys.argv[1]))["warnings"] if "libdebuginfod1" in x]
sys.exit(0 if len(w) == 1 else 1)
PY
fi
echo PASS
