#!/bin/bash
# opvm export --format speedscope: the file follows speedscope's file
# format (file-format-spec.ts in the speedscope sources: "$schema", shared
# frames {name}, profiles of type "sampled" with samples as frame-index
# stacks and one weight each, unit, startValue/endValue), one profile per
# guest, and its weights add up to `opvm report -l`'s counts per guest and
# per symbol.  Runs on the report fixture (two guests).
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }
fixture_tmp export-speedscope
trap 'rm -rf "$tmp"' EXIT
make_fixture "$tmp"

common=(--session-dir "$session" --guest-root "t1=$root" --no-host-kernel)
DEBUGINFOD_URLS= "$OPVM" report -l --format json "${common[@]}" > "$tmp/report.json" || exit 1
DEBUGINFOD_URLS= "$OPVM" export --format speedscope -o "$tmp/prof.speedscope.json" \
	"${common[@]}" || exit 1
DEBUGINFOD_URLS= "$OPVM" export --format speedscope "${common[@]}" > "$tmp/stdout.json" || exit 1
cmp -s "$tmp/prof.speedscope.json" "$tmp/stdout.json" || { echo "FAIL: -o and stdout differ"; exit 1; }
# -o - is stdout (never a file named "-"), for a binary format on a pipe too
(o=$(realpath "$OPVM") && cd "$tmp" && DEBUGINFOD_URLS= "$o" export --format speedscope -o - "${common[@]}" > dash.json) ||
	exit 1
cmp -s "$tmp/prof.speedscope.json" "$tmp/dash.json" || { echo "FAIL: -o - and stdout differ"; exit 1; }
(o=$(realpath "$OPVM") && cd "$tmp" && DEBUGINFOD_URLS= "$o" export --format pprof -o - "${common[@]}" > dash.pb.gz) || exit 1
DEBUGINFOD_URLS= "$OPVM" export --format pprof -o "$tmp/file.pb.gz" "${common[@]}" 2>/dev/null || exit 1
cmp -s "$tmp/file.pb.gz" "$tmp/dash.pb.gz" || { echo "FAIL: pprof -o - differs from -o FILE"; exit 1; }
[ ! -e "$tmp/-" ] || { echo "FAIL: -o - wrote a file named '-'"; exit 1; }
# -o naming what is not a file (a FIFO, /dev/stdout) is written in place:
# renamed over, /dev/stdout would become a file (as root) and a temporary
# would be left in /dev.
mkfifo "$tmp/fifo"
timeout 20 cat "$tmp/fifo" > "$tmp/fifo.json" &
DEBUGINFOD_URLS= "$OPVM" export --format speedscope -o "$tmp/fifo" "${common[@]}" || exit 1
wait
[ -p "$tmp/fifo" ] || { echo "FAIL: -o FIFO: the FIFO was replaced"; exit 1; }
cmp -s "$tmp/prof.speedscope.json" "$tmp/fifo.json" || { echo "FAIL: -o FIFO: other bytes"; exit 1; }
if [ -L /dev/stdout ]; then
	DEBUGINFOD_URLS= "$OPVM" export --format speedscope -o /dev/stdout "${common[@]}" |
		cat > "$tmp/devstdout.json"
	if [ ! -L /dev/stdout ]; then
		rm -f /dev/stdout && ln -s /proc/self/fd/1 /dev/stdout
		echo "FAIL: -o /dev/stdout replaced /dev/stdout (restored)"; exit 1
	fi
	ls /dev/stdout.tmp* 2>/dev/null && { rm -f /dev/stdout.tmp*; echo "FAIL: a temporary left in /dev"; exit 1; }
	cmp -s "$tmp/prof.speedscope.json" "$tmp/devstdout.json" ||
		{ echo "FAIL: -o /dev/stdout: other bytes"; exit 1; }
fi
# ... but a link another local user planted there is replaced, never
# followed (root would write through it into whatever it names)
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	echo keep > "$tmp/victim"
	ln -s "$tmp/victim" "$tmp/planted"
	chown -h nobody "$tmp/planted"
	DEBUGINFOD_URLS= "$OPVM" export --format speedscope -o "$tmp/planted" "${common[@]}" || exit 1
	[ "$(cat "$tmp/victim")" = keep ] || { echo "FAIL: -o followed another user's link"; exit 1; }
	[ -L "$tmp/planted" ] && { echo "FAIL: -o left another user's link in place"; exit 1; }
	cmp -s "$tmp/prof.speedscope.json" "$tmp/planted" || { echo "FAIL: -o over a link: other bytes"; exit 1; }
fi
python3 - "$tmp/prof.speedscope.json" "$tmp/report.json" <<'PY'
import collections, json, sys
ss, rep = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
fails = []
def need(cond, what):
    if not cond:
        fails.append(what)
need(ss.get("$schema") == "https://www.speedscope.app/file-format-schema.json", "$schema")
frames = ss.get("shared", {}).get("frames", [])
need(frames and all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in frames),
     "shared.frames: objects with a name")
need(isinstance(ss.get("exporter"), str) and ss["exporter"].startswith("opvm "), "exporter")
need(ss.get("activeProfileIndex") == 0, "activeProfileIndex")
per_guest, per_sym = {}, collections.Counter()
for p in ss.get("profiles", []):
    need(p.get("type") == "sampled", "profile type")
    need(p.get("unit") in ("none", "nanoseconds", "microseconds", "milliseconds",
                           "seconds", "bytes"), "unit")
    s, w = p.get("samples", []), p.get("weights", [])
    need(len(s) == len(w) and s, "one weight per sample")
    need(all(isinstance(i, int) and 0 <= i < len(frames) for st in s for i in st),
         "frame indices in range")
    need(p.get("startValue") == 0 and p.get("endValue") == sum(w), "start/endValue")
    per_guest[p["name"].split(",")[0].split()[1]] = sum(w)
    for st, n in zip(s, w):
        per_sym[frames[st[-1]]["name"]] += n
want_guest, want_sym = collections.Counter(), collections.Counter()
for r in rep["symbols"]:
    want_guest[r["guest"]] += r["samples"]
    want_sym[r["symbol"] if r["symbol"] is not None else "[unknown]"] += r["samples"]
need(per_guest == dict(want_guest), "weights per guest %s vs report %s" % (per_guest, dict(want_guest)))
need(per_sym == want_sym, "weights per symbol differ from report -l")
print("RESULT speedscope: %d profiles (%s), %d frames, %d samples; weights per guest and "
      "per symbol equal report -l's" % (len(ss["profiles"]), ", ".join(sorted(per_guest)),
                                       len(frames), sum(per_guest.values())))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
