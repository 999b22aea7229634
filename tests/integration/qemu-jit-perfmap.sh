#!/bin/bash
# JIT code named by the guest runtime's perf map (docs/runtimes.md), fast:
# the test image's jitmap (images/workloads/jitmap.c) copies one function
# three times into anonymous executable memory, names the copies jit_a,
# jit_b, jit_c in /tmp/perf-PID.map and runs them 10/30/60 units of
# identical work a round; three quarters through its 16 s it compiles
# jit_late and appends its line: the host's first read of the map waits
# behind the session's first fetches (kallsyms, binaries), and a loaded
# host must still read the map once before it grows.  opvm run profiles
# it under QEMU TCG with opvm.ko and its relay, which send the map as it grows (FETCH, OPVM_FETCH_F_PERFMAP),
# with call graphs (-g, frame pointers): main calls jit_a through
# jit_via_a and jit_b through jit_via_b (JIT code calling JIT code), jit_c
# itself.  jitmap also writes a jitdump as perf's agents do, away from
# /tmp/jit-PID.dump (the relay finds it by the process's mapping of it),
# naming two more functions the perf map does not: jdump_p and jdump_q
# (20/40 units), jdump_q moved (JIT_CODE_MOVE) before it runs.  Asserts:
#  - session.json "fetch" "perfmaps": jitmap's map came whole (its seven
#    lines, the bytes the guest wrote), in more than one transfer that
#    brought bytes (it grew during the session), nothing refused;
#  - >= 90 % of jitmap's samples in anonymous memory are named by the map
#    (count-aware: allowed_misses), image [jit], in the text and JSON
#    reports;
#  - jit_a/jit_b/jit_c split 10/30/60 % of their samples within 2 pp
#    (widened to 3 sigma of the count: bounds.tol);
#  - jit_late, which the host could only read of after the session
#    started, has samples; jit_old, whose range jit_a's later line took,
#    has none (the latest line wins);
#  - every JIT frame of a stack is named by the same map, callers as well
#    as leaves (opvm export --format folded): >= 90 % of the stacks' samples
#    whose leaf is jit_a have jit_via_a then main above it, jit_b
#    jit_via_b then main, jit_c main (count-aware: allowed_misses), and
#    no stack of jitmap keeps an {anon} frame past that allowance;
#  - the jitdump came whole (session.json: kind jitdump; the stored file
#    is the guest's, byte for byte, per the relay's size), and jdump_p
#    and jdump_q, which only it names, split 1/3 2/3 of their samples
#    within 3 pp (bounds.tol), jdump_q at its moved address; their callers
#    are main; the dump grew in the session (more than one transfer that
#    brought bytes) and jdump_late, loaded with jit_late, has samples;
#  - opvm annotate --assembly jdump_p shows its instructions, from the
#    dump's code bytes (the multiply of its loop).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ -x "$IMG/root/usr/bin/jitmap" ] || fail "no jitmap in $IMG: run 'make images'"
mk_tmp qemu-jit-perfmap
S=$T/session

"$OPVM" run --workload jitmap:16,10,30,60,75 -F 200 -g -d "$S" > "$T/run.out" 2> "$T/run.err"
rc=$?
cat "$T/run.out" "$T/run.err"
[ $rc = 0 ] || fail "opvm run exited with $rc"
CL=$S/guests/guest/console.log
grep -aq "OPVM-TRUTH jitmap done" "$CL" || fail "the workload did not finish (see $CL)"
pid=$(grep -a -m1 -o "OPVM-TRUTH jitmap pid=[0-9]*" "$CL" | sed 's/.*=//')
[ -n "$pid" ] || fail "no jitmap pid in $CL"
SJ=$S/guests/guest/samples/current/session.json
[ -f "$SJ" ] || fail "no $SJ"
report_json "$S" > "$T/r.json" 2> "$T/r.err" || { cat "$T/r.err"; fail "opvm report -l --format json"; }
"$OPVM" report -l -d "$S" --guest-root "$IMG/root" --system-map "$IMG/System.map" \
	> "$T/r.txt" 2>&1 || { cat "$T/r.txt"; fail "opvm report -l"; }
grep -E "\[jit\] +jitmap +jit_[abc]" "$T/r.txt" | head -3
[ "$(grep -cE "\[jit\] +jitmap +jit_[abc]$" "$T/r.txt")" = 3 ] ||
	fail "the text report has no [jit] row of each of jit_a, jit_b, jit_c"
"$OPVM" annotate --assembly jdump_p -d "$S" --guest-root "$IMG/root" \
	--system-map "$IMG/System.map" > "$T/ann.txt" 2>&1 || { cat "$T/ann.txt"; fail "opvm annotate"; }
grep -m3 -E "imul|<jdump_p>" "$T/ann.txt"
grep -q "<jdump_p>:" "$T/ann.txt" && grep -qE "imul +rax, rcx" "$T/ann.txt" ||
	{ cat "$T/ann.txt"; fail "annotate --assembly jdump_p shows no code from the jitdump"; }
"$OPVM" export --format folded -d "$S" --guest-root "$IMG/root" --system-map "$IMG/System.map" \
	-o "$T/folded.txt" > "$T/x.err" 2>&1 || { cat "$T/x.err"; fail "opvm export --format folded"; }

python3 - "$SJ" "$T/r.json" "$pid" "$S/guests/guest/perfmaps/$pid.map" \
	"$(dirname "$0")" "$T/folded.txt" "$S/guests/guest/perfmaps/$pid.dump" <<'EOF' || exit 1
import json, os, sys
sys.path.insert(0, sys.argv[5])
import bounds
sj, rep, pid, mapfile = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
ok = True
pm = sj["fetch"]["perfmaps"]
m = [x for x in pm["maps"] if x["pid"] == pid and x.get("kind", "map") == "map"]
jd = [x for x in pm["maps"] if x["pid"] == pid and x.get("kind") == "jitdump"]
lines = open(mapfile).read().splitlines() if os.path.exists(mapfile) else []
print("RESULT perf map of pid %d: %s; %d lines stored; totals requests %d grew %d bytes %d "
      "refused %d capped %d bad_order %d" % (pid, m[0] if m else None, len(lines), pm["requests"],
      pm["grew"], pm["bytes"], pm["refused"], pm["capped"], pm["bad_order"]))
if not m or len(lines) != 7 or not lines[-1].endswith(" jit_late"):
    print("FAIL: jitmap's map did not come whole (7 lines, jit_late last)"); ok = False
elif m[0]["grew"] < 2:
    print("FAIL: the map came in %d transfer(s) with bytes: it did not grow in the session"
          % m[0]["grew"]); ok = False
if pm["refused"] or pm["capped"] or pm["bad_order"]:
    print("FAIL: a perf map was refused, capped or out of order"); ok = False
rows = [r for r in rep["symbols"] if not r["kernel"] and r["app"].endswith("/jitmap")]
jit = {r["symbol"]: r["samples"] for r in rows if r["image"] == "[jit]"}
anon = sum(r["samples"] for r in rows if r["image"] == "{anon}")
named, total = sum(jit.values()), sum(jit.values()) + anon
print("RESULT jitmap: %d samples in anonymous memory, %d named by the map (%.2f %%): %s"
      % (total, named, 100.0 * named / max(total, 1), jit))
# Every verdict here is count-aware (allowed_misses, tol widen for few
# samples): the floors (30 here, 10 for jdump_p/q, 5 a leaf's stacks) only
# say each path ran.  A busy host (two busy loops on both cores) makes the
# gdbstub round trip ~100 times an idle one's: a third of the samples or
# less, where fixed minimums of 300/100/20 failed right results.
if total < 30:
    print("FAIL: too few JIT samples (%d) to judge" % total); ok = False
if total - named > bounds.allowed_misses(total, 0.10):
    print("FAIL: %d of %d JIT samples unnamed, more than 10 %% allows" % (total - named, total)); ok = False
three = sum(jit.get(f, 0) for f in ("jit_a", "jit_b", "jit_c"))
for f, u in (("jit_a", 10), ("jit_b", 30), ("jit_c", 60)):
    p = jit.get(f, 0) / max(three, 1)
    t = bounds.tol(2.0, p, three, u / 100.0, 10**9)
    print("RESULT %s: %.2f %% of jit_a/b/c's %d samples (truth %d %%, tolerance %.2f pp)"
          % (f, 100 * p, three, u, t))
    if abs(100 * p - u) > t:
        print("FAIL: %s is %.2f pp off its share" % (f, 100 * p - u)); ok = False
if not jit.get("jit_late"):
    print("FAIL: jit_late, compiled after the session started, is not named"); ok = False
if jit.get("jit_old"):
    print("FAIL: jit_old has samples: its range was named again later"); ok = False
# the jitdump: whole, and the names only it has
dump = sys.argv[7]
dsize = os.path.getsize(dump) if os.path.exists(dump) else 0
print("RESULT jitdump of pid %d: %s; %d bytes stored" % (pid, jd[0] if jd else None, dsize))
if not jd or not dsize or jd[0]["bytes"] != dsize or open(dump, "rb").read(4) != b"DTiJ":
    print("FAIL: jitmap's jitdump did not come (or not as stored)"); ok = False
elif jd[0]["grew"] < 2:
    print("FAIL: the jitdump came in %d transfer(s) with bytes: it did not grow" % jd[0]["grew"])
    ok = False
if not jit.get("jdump_late"):
    print("FAIL: jdump_late, loaded after the session started, is not named"); ok = False
two = jit.get("jdump_p", 0) + jit.get("jdump_q", 0)
for f, u in (("jdump_p", 1 / 3.0), ("jdump_q", 2 / 3.0)):
    p = jit.get(f, 0) / max(two, 1)
    t = bounds.tol(3.0, p, two, u, 10**9)
    print("RESULT %s: %.2f %% of jdump_p/q's %d samples (truth %.1f %%, tolerance %.2f pp)"
          % (f, 100 * p, two, 100 * u, t))
    if two < 10 or abs(100 * p - 100 * u) > t:
        print("FAIL: %s is not named from the jitdump at its share" % f); ok = False
# the call graph: each leaf's callers (folded: guest;process;root;...;leaf N)
want = {"jit_a": ["jit_via_a", "main"], "jit_b": ["jit_via_b", "main"], "jit_c": ["main"],
        "jdump_p": ["main"], "jdump_q": ["main"]}
got = {f: [0, 0] for f in want}
anon = [0, 0]
for line in open(sys.argv[6]):
    chain, _, n = line.rstrip("\n").rpartition(" ")
    fr, n = chain.split(";"), int(n)
    if len(fr) < 3 or fr[1] != "jitmap":
        continue
    anon[0] += n
    anon[1] += n if "[{anon}]" in fr[2:] else 0
    if fr[-1] in want:
        w = want[fr[-1]]
        got[fr[-1]][0] += n
        got[fr[-1]][1] += n if fr[-1 - len(w):-1] == w[::-1] else 0
for f, w in want.items():
    tot, right = got[f]
    print("RESULT callers of %s: %d of %d stack samples under %s" % (f, right, tot, " <- ".join(w)))
    if tot < 5:	# jit_a is ~6 % of jitmap's samples: ~70 on a busy host, fewer on a loaded one
        print("FAIL: too few stacks with leaf %s (%d) to judge" % (f, tot)); ok = False
    elif tot - right > bounds.allowed_misses(tot, 0.10):
        print("FAIL: %s's callers are not %s in %d of %d samples" % (f, w, tot - right, tot)); ok = False
print("RESULT jitmap stacks: %d samples, %d with an {anon} frame" % (anon[0], anon[1]))
if anon[1] > bounds.allowed_misses(anon[0], 0.10):
    print("FAIL: %d of jitmap's %d stack samples keep an {anon} frame" % (anon[1], anon[0])); ok = False
sys.exit(0 if ok else 1)
EOF
echo "PASS"
