#!/bin/bash
# opvm export --format pprof: `go tool pprof -top` reads the file and shows
# the same top-5 symbols, in the same order, as `opvm report -l --format json`.
# Runs on the report fixture (tests/golden/fixture.h: binaries compiled with
# cc -g -O1, a real sample tree written with the store API).
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash

command -v go >/dev/null || { echo "SKIP: go is missing (apt-get install golang-go)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
[ -x "$OPVM" ] || { echo "FAIL: $OPVM not built"; exit 1; }

tmp=$(mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/export-pprof.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

make_fixture "$tmp"

common=(--session-dir "$session" --guest-root "t1=$root" --no-host-kernel)
DEBUGINFOD_URLS= "$OPVM" report -l --format json "${common[@]}" > "$tmp/report.json" || exit 1
DEBUGINFOD_URLS= "$OPVM" export --format pprof -o "$tmp/prof.pb.gz" "${common[@]}" || exit 1
gzip -t "$tmp/prof.pb.gz" || { echo "FAIL: not a gzip file"; exit 1; }
HOME=$tmp GOCACHE=$tmp/gocache go tool pprof -top "$tmp/prof.pb.gz" > "$tmp/top.txt" 2> "$tmp/pprof.err" || {
	echo "FAIL: go tool pprof cannot read the export"; cat "$tmp/pprof.err"; exit 1; }
cat "$tmp/top.txt"

python3 - "$tmp/report.json" "$tmp/top.txt" <<'PY'
import json, os, sys
rep = json.load(open(sys.argv[1]))
want = []
for s in rep["symbols"][:5]:
    name = s["symbol"] if s["symbol"] is not None else "(no symbols) " + os.path.basename(s["image"])
    want.append(name)
got, started = [], False
for line in open(sys.argv[2]):
    if line.split()[:2] == ["flat", "flat%"]:
        started = True
        continue
    if started and line.strip():
        got.append(line.split(None, 5)[5].strip())
got = got[:5]
print("RESULT report top-5:", want)
print("RESULT pprof  top-5:", got)
sys.exit(0 if got == want else 1)
PY
rc=$?
[ $rc = 0 ] || { echo "FAIL: top symbols differ"; exit 1; }

# Sample types named for what they hold: the fixture's TIMER counts
# microseconds, so the second value is time, not "events".
HOME=$tmp GOCACHE=$tmp/gocache go tool pprof -raw "$tmp/prof.pb.gz" > "$tmp/raw.txt" 2>&1 ||
	{ echo "FAIL: go tool pprof -raw"; cat "$tmp/raw.txt"; exit 1; }
types=$(grep -A1 '^Samples:' "$tmp/raw.txt" | tail -1 | xargs)
echo "RESULT pprof sample types: $types; $(grep -m1 '^PeriodType' "$tmp/raw.txt")"
[ "$types" = "samples/count[dflt] timer/microseconds" ] || { echo "FAIL: sample types '$types'"; exit 1; }
echo "RESULT pprof top-5 symbols match opvm report -l"
