#!/bin/bash
# Node.js JIT code named by its own perf map (docs/runtimes.md) on the
# Debian disk guest: Debian's nodejs runs /usr/local/share/opvm-jit3.js
# (`opvm-wl jit`: node --perf-basic-prof --no-turbo-inlining), three JS
# functions jitA/jitB/jitC doing identical work 10/30/60 units a round,
# and lateD compiled from source half-way through.  opvm run --disk
# profiles it under TCG with opvm.ko and its relay, which send
# /tmp/perf-PID.map as V8 appends to it.  Asserts:
#  - session.json "fetch" "perfmaps": node's map came in more than one
#    transfer that brought bytes (it grew during the session), nothing
#    refused, capped or out of order;
#  - >= 90 % of node's samples in anonymous memory are named by a JS
#    function of the script (count-aware: bounds.allowed_misses);
#  - jitA/jitB/jitC split 10/30/60 % of their samples within 2 pp
#    (widened to 3 sigma of the count, bounds.tol);
#  - lateD, JITted after the session started, is named.
# JIT_SECS (default 120) sets the workload's length.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
mk_tmp disk-guest-jit
img=$(realpath "$DISK/disk.img")
SECS=${JIT_SECS:-120}
S=$T/s

XDG_CACHE_HOME=$T/cache timeout 1500 "$OPVM" run --disk "$img" \
	--workload "jit-$SECS-$((SECS / 2))" -F 50 -d "$S" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run --disk failed"; }
CL=$S/guests/guest/console.log
grep -a "OPVM-TRUTH jit3" "$CL"
grep -aq "OPVM-TRUTH jit3 done" "$CL" || { tail -30 "$CL"; fail "the workload did not finish"; }
pid=$(grep -a -m1 -o "OPVM-TRUTH jit3 pid=[0-9]*" "$CL" | sed 's/.*=//')
SJ=$S/guests/guest/samples/current/session.json
"$OPVM" report -l --format json -d "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report -l --format json"; }
"$OPVM" report -l -d "$S" > "$T/r.txt" 2>&1 || { cat "$T/r.txt"; fail "opvm report -l"; }
grep -m8 "\[jit\]" "$T/r.txt"

python3 - "$SJ" "$T/r.json" "$pid" "$(dirname "$0")" <<'EOF' || exit 1
import json, re, sys
sys.path.insert(0, sys.argv[4])
import bounds
sj, rep, pid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
ok = True
pm = sj["fetch"]["perfmaps"]
m = [x for x in pm["maps"] if x["pid"] == pid and x.get("kind", "map") == "map"]
print("RESULT perf map of node (pid %d): %s; totals requests %d grew %d bytes %d refused %d "
      "capped %d bad_order %d" % (pid, m[0] if m else None, pm["requests"], pm["grew"],
      pm["bytes"], pm["refused"], pm["capped"], pm["bad_order"]))
if not m or m[0]["grew"] < 2:
    print("FAIL: node's perf map did not grow during the session"); ok = False
if pm["capped"] or pm["bad_order"]:
    print("FAIL: a perf map was capped or out of order"); ok = False
rows = [r for r in rep["symbols"] if not r["kernel"] and r["app"].endswith("/node")
        and r["image"] in ("[jit]", "{anon}")]
fn = re.compile(r"[*~]?(jitA|jitB|jitC|lateD)\b")
by = {}
for r in rows:
    mm = fn.search(r["symbol"] or "") if r["image"] == "[jit]" else None
    k = mm.group(1) if mm else ("other " + r["image"])
    by[k] = by.get(k, 0) + r["samples"]
total = sum(by.values())
named = sum(v for k, v in by.items() if not k.startswith("other"))
other = sorted(((r["samples"], r["symbol"]) for r in rows
                if r["image"] == "[jit]" and not fn.search(r["symbol"] or "")), reverse=True)[:5]
print("RESULT node: %d samples in anonymous memory, %d (%.2f %%) named by a JS function of the "
      "script: %s; top other names %s" % (total, named, 100.0 * named / max(total, 1), by, other))
if total < 300:
    print("FAIL: too few JIT samples (%d) to judge" % total); ok = False
if total - named > bounds.allowed_misses(total, 0.10):
    print("FAIL: %d of %d JIT samples not named by a JS function" % (total - named, total)); ok = False
three = sum(by.get(f, 0) for f in ("jitA", "jitB", "jitC"))
for f, u in (("jitA", 10), ("jitB", 30), ("jitC", 60)):
    p = by.get(f, 0) / max(three, 1)
    t = bounds.tol(2.0, p, three, u / 100.0, 10**9)
    print("RESULT %s: %.2f %% of jitA/B/C's %d samples (truth %d %%, tolerance %.2f pp)"
          % (f, 100 * p, three, u, t))
    if abs(100 * p - u) > t:
        print("FAIL: %s is %.2f pp off its share" % (f, 100 * p - u)); ok = False
if not by.get("lateD"):
    print("FAIL: lateD, JITted after the session started, is not named"); ok = False
sys.exit(0 if ok else 1)
EOF
echo "PASS"
