#!/bin/bash
# opvm export --format pprof: `go tool pprof -list func_b` prints the hot
# source line with its samples (DWARF lines, source via --source-dir);
# mappings carry build-ids; `go tool pprof -top` reads the file and shows
# the same top-5 symbols, in the same order, as `opvm report -l --format json`.
# Runs on the report fixture (tests/golden/fixture.h: binaries compiled with
# cc -g -O1, a real sample tree written with the store API).
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
command -v go >/dev/null || { echo "SKIP: go is missing (apt-get install golang-go)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
fixture_tmp export-pprof
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
# Build-ids on the mappings, from the images the report resolved.
grep -Eq "^[0-9]+: [^ ]+ /usr/bin/prog [0-9a-f]{40} " "$tmp/raw.txt" || { echo "FAIL: no build-id on prog's mapping"; sed -n '/^Mappings/,$p' "$tmp/raw.txt"; exit 1; }
# Real ranges: prog's mapping is its executable segment as linked (from
# readelf), with its file offset, and every location of prog falls in it.
LC_ALL=C readelf -lW "$root/usr/bin/prog" > "$tmp/readelf.txt" || { echo "FAIL: readelf"; exit 1; }
python3 - "$tmp/readelf.txt" "$tmp/raw.txt" <<'PY' || exit 1
import re, sys
seg = re.search(r"^\s*LOAD\s+0x(\w+)\s+0x(\w+)\s+0x\w+\s+0x(\w+)\s+0x\w+\s+R E\b",
                open(sys.argv[1]).read(), re.M)
foff, vaddr, filesz = (int(x, 16) for x in seg.groups())
raw = open(sys.argv[2]).read()
# the first guest's prog (t1: its binary is under --guest-root)
mid, rng = re.search(r"^(\d+): (\S+) /usr/bin/prog ", raw, re.M).groups()
start, limit, off = (int(x, 16) for x in rng.split("/"))
print("RESULT pprof mapping of prog: 0x%x-0x%x offset 0x%x (readelf: LOAD R E at 0x%x, "
      "size 0x%x, offset 0x%x)" % (start, limit, off, vaddr, filesz, foff))
if (start, limit, off) != (vaddr, vaddr + filesz, foff):
    print("FAIL: the mapping is not prog's executable segment"); sys.exit(1)
locs = re.findall(r"^\s*\d+: 0x([0-9a-f]+) M=" + mid + r"\b", raw, re.M)
bad = [a for a in locs if int(a, 16) and not start <= int(a, 16) < limit]
if not locs or bad:
    print("FAIL: %d locations of prog, %d outside its mapping" % (len(locs), len(bad))); sys.exit(1)
print("RESULT %d locations of prog, all inside its mapping" % len(locs))
PY

# -list: DWARF lines per address, the source found through --source-dir
# (an absolute host path in the profile, so pprof reads it from any
# directory).
src=$(pwd)/tests/golden/fixtures
DEBUGINFOD_URLS= "$OPVM" export --format pprof -o "$tmp/lines.pb.gz" "${common[@]}" --source-dir "$src" || exit 1
(cd "$tmp" && HOME=$tmp GOCACHE=$tmp/gocache go tool pprof -list '^func_b$' lines.pb.gz) > "$tmp/list.txt" 2>&1 ||
	{ echo "FAIL: go tool pprof -list func_b"; cat "$tmp/list.txt"; exit 1; }
hot=$(grep 'HOT_B' "$tmp/list.txt")
echo "RESULT pprof -list func_b: $(grep -m1 ROUTINE "$tmp/list.txt" | xargs); hot line: $(echo "$hot" | xargs)"
grep -q "ROUTINE .* func_b in $src/prog.c" "$tmp/list.txt" || { echo "FAIL: -list does not name $src/prog.c"; cat "$tmp/list.txt"; exit 1; }
echo "$hot" | awk '{exit !($1 > 0)}' || { echo "FAIL: func_b's hot source line has no samples"; cat "$tmp/list.txt"; exit 1; }
echo "RESULT pprof top-5 symbols match opvm report -l"
