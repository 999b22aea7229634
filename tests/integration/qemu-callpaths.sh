#!/bin/bash
# Call graphs against a known answer: the callpaths workload (images/)
# reaches hot_leaf along three paths with 20/30/50 % of its work, the third
# through libc's qsort, which Debian builds without frame pointers.
#   -g (fp):       hot_leaf's samples by path a and b (the workload's own
#                  frames) within 3 pp of the truth; path c stops in qsort
#   -g dwarf:      all three within 3 pp, and >= 90 % of the qsort-callback
#                  samples reach main (through libc, by its .eh_frame)
# 20 s of work a run: about 2,300 hot_leaf samples, so the binomial spread
# of a share (1 pp at 30 %) stays well inside 3 pp.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-callpaths
SECS=${CALLPATHS_SECONDS:-20}

for mode in fp dwarf; do
	"$OPVM" run --workload "callpaths:$SECS" -F 200 --call-graph $mode -d "$T/$mode" \
		> "$T/$mode.out" 2>&1 || { cat "$T/$mode.out"; fail "opvm run --call-graph $mode"; }
	grep -A1 "call graphs" "$T/$mode.out"
	"$OPVM" report -d "$T/$mode" --format json > "$T/$mode.json" || fail "report $mode"
done
python3 - "$T/fp.json" "$T/dwarf.json" "$T/dwarf/guests/guest/console.log" <<'PY' || fail "call paths"
import json, math, re, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo, share_tol
fails = []
line = re.search(r"callpaths share (.*)", open(sys.argv[3]).read())
truth = dict(re.findall(r"path_(\w)=([\d.]+)", line.group(1) if line else ""))
truth = {k: float(v) for k, v in truth.items()}
if sorted(truth) != ["a", "b", "c"]:
    print("FAIL: the workload printed no truth"); sys.exit(1)

def split(path):
    j = json.load(open(path))
    n = {"a": 0, "b": 0, "c": 0, "?": 0, "all": 0}
    main_c = libc_c = 0
    for st in j["stacks"]:
        fr = [f["symbol"] or "" for f in st["frames"]]
        if st["app"].endswith("/callpaths") and not st["frames"][0]["kernel"]:
            n["all"] += st["samples"]
        if not st["app"].endswith("/callpaths") or fr[0] != "hot_leaf":
            continue
        k = "a" if "path_a" in fr else "b" if "mid_b" in fr or "path_b" in fr else \
            "c" if "cmp_c" in fr else "?"
        n[k] += st["samples"]
        if k == "c":
            main_c += st["samples"] if "main" in fr else 0
            libc_c += st["samples"] if any(f["image"].endswith("libc.so.6") for f in st["frames"]) else 0
    return n, main_c, libc_c

for mode, path in (("fp", sys.argv[1]), ("dwarf", sys.argv[2])):
    n, main_c, libc_c = split(path)
    tot = n["a"] + n["b"] + n["c"] + n["?"]
    share = {k: n[k] / max(tot, 1) for k in n}
    print("RESULT %s: hot_leaf %d samples; by path a/b/c %.1f/%.1f/%.1f %% (truth %.0f/%.0f/%.0f), "
          "no path %d; path c reaching main %d of %d, through libc %d"
          % (mode, tot, 100 * share["a"], 100 * share["b"], 100 * share["c"],
             100 * truth["a"], 100 * truth["b"], 100 * truth["c"], n["?"], main_c, n["c"], libc_c))
    # from what the run sampled: hot_leaf is nearly all of callpaths' user
    # time; a share's tolerance is 3 pp or 3 sigma of its count
    if not tot or tot < count_lo(n["all"], 0.8):
        fails.append("%s: %d hot_leaf samples of %d callpaths user samples" % (mode, tot, n["all"]))
    for k in ("a", "b") if mode == "fp" else ("a", "b", "c"):
        if abs(share[k] - truth[k]) > share_tol(truth[k], tot, 0.03):
            fails.append("%s: path %s %.1f %% against %.0f %%" % (mode, k, 100 * share[k], 100 * truth[k]))
    if mode == "dwarf" and main_c < count_lo(n["c"], 0.9):
        fails.append("dwarf: %d of %d qsort-callback samples reach main" % (main_c, n["c"]))
    if mode == "fp" and main_c:
        fails.append("fp: %d path-c samples reached main through a libc without frame pointers?" % main_c)
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
# pprof with the sources: -list shows the call lines with the samples
# below them (cumulative), from the callers' Locations.
"$OPVM" export -d "$T/dwarf" --format pprof -o "$T/d.pb.gz" --source-dir images/workloads \
	> /dev/null 2>&1 || fail "export pprof"
HOME=$T GOCACHE=$T/gocache go tool pprof -list 'mid_b' "$T/d.pb.gz" > "$T/list.txt" 2>&1 ||
	{ cat "$T/list.txt"; fail "go tool pprof -list mid_b"; }
line=$(grep -E '^ +\. +[0-9]+ +[0-9]+:.*hot_leaf\(iters\);' "$T/list.txt") ||
	{ cat "$T/list.txt"; fail "pprof -list mid_b shows no samples at its call of hot_leaf"; }
echo "RESULT pprof -list mid_b:$(echo "$line" | tr -s ' ')"
exit 0
