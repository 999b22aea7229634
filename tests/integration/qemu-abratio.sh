#!/bin/bash
# opvm run boots the abratio guest (func_a 1 %, func_b 99 % of its CPU time)
# under QEMU TCG and profiles it through the gdbstub.  Asserts:
#  - func_b's share of func_a's and func_b's samples is the guest's own
#    measure of their split (OPVM-TRUTH, about 99 %) +- 3 pp; the rest of
#    abratio (its loop, its clock reads) is in neither;
#  - >= 98 % of user-mode samples taken while the guest module runs are
#    filed under a named process and image (not {anon...}).
# Bounds and minimums are derived from what the run sampled (3 sigma of the
# binomial count, tests/integration/bounds.py), never a fixed count: a busy
# host takes fewer samples.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-abratio
S=$T/session

# --introspect off: this asks what opvm.ko names; with introspection, samples
# taken before its HELLO are held and filed under the process the guest's
# memory names, in an {anon} image, instead of counted as unresolved
# (introspect-guest tests that source).
"$OPVM" run --workload abratio -F 200 --introspect off -d "$S" > "$T/run.out" 2> "$T/run.err"
rc=$?
cat "$T/run.out" "$T/run.err"
[ $rc = 0 ] || fail "opvm run exited with $rc"
con=$S/guests/guest/console.log
grep -q "OPVM-TRUTH exit workload=abratio rc=0" "$con" || fail "the workload did not finish (see $con)"
grep -q "mode gdbstub-timer" "$T/run.out" || fail "the summary does not say how samples were taken"

report_json "$S" > "$T/report.json" 2> "$T/report.err" || {
	cat "$T/report.err"
	fail "opvm report -l --format json failed"
}
python3 - "$T/report.json" "$S/guests/guest/samples/current/session.json" "$con" <<'EOF' || exit 1
import json, math, re, sys
sys.path.insert(0, "tests/integration")
from bounds import allowed_misses, count_lo, share_tol
d = json.load(open(sys.argv[1]))
st = json.load(open(sys.argv[2]))["stats"]
rows = d["symbols"]
ab = [r for r in rows if not r["kernel"] and r["image"].endswith("/abratio")]
tot = sum(r["samples"] for r in ab)
fb = sum(r["samples"] for r in ab if r["symbol"] == "func_b")
fa = sum(r["samples"] for r in ab if r["symbol"] == "func_a")
truth = float(re.search(r"OPVM-TRUTH abratio share func_a=\S+ func_b=(\S+)",
                        open(sys.argv[3], errors="replace").read()).group(1))
share = 100.0 * fb / max(fa + fb, 1)
print("RESULT abratio func_b share of func_a + func_b: %.2f %% of %d samples (func_a %.2f %%, "
      "the rest of abratio %d; truth %.2f %%)"
      % (share, fa + fb, 100.0 * fa / max(fa + fb, 1), tot - fa - fb, 100 * truth))
user = [r for r in rows if not r["kernel"]]
utot = sum(r["samples"] for r in user)
named = sum(r["samples"] for r in user
            if not r["app"].startswith("{") and not r["image"].startswith("{"))
print("RESULT user samples under a named process and image: %.2f %% (%d of %d, whole boot)"
      % (100.0 * named / max(utot, 1), named, utot))
# Before the guest module's HELLO nothing can name a process: those samples
# are "unresolved" in session.json.  The criterion is about the rest.
pre = st.get("unresolved", 0)
after = utot - pre
print("RESULT user samples under a named process and image once opvm.ko runs: "
      "%.2f %% (%d of %d; %d taken before its HELLO)"
      % (100.0 * min(named, after) / max(after, 1), min(named, after), after, pre))
ok = True
# abratio is the only busy user process once opvm.ko runs: at least half of
# those user samples are its own
print("RESULT abratio: %d of the %d user samples once opvm.ko runs (at least %.0f expected)"
      % (tot, after, count_lo(after, 0.5)))
if not tot or tot < count_lo(after, 0.5):
    print("FAIL: only %d user samples of abratio of %d" % (tot, after)); ok = False
tolpp = 100 * share_tol(truth, fa + fb, 0.03)
if abs(share - 100 * truth) > tolpp:
    print("FAIL: func_b share %.2f %% is not %.2f +- %.1f" % (share, 100 * truth, tolpp)); ok = False
# func_a's 1 % must show at all (about 6 samples expected): a stop that
# waits behind the guest's clock reads skips it (docs/usage.md).  With
# fewer than 6 expected (a loaded host throttles ticks: 370 user samples,
# 3.7 expected, once), none is 2.5 % likely by chance alone: not asked.
lam = 0.01 * (fa + fb)
if fa == 0 and lam >= 6:
    print("FAIL: no sample in func_a (1 % of the time, %.1f expected)" % lam); ok = False
elif fa == 0:
    print("NOTE: no sample in func_a, %.1f expected: too few samples to ask for one" % lam)
# 98.85 % (5 of 433) was seen once on a fresh main (cause not found yet):
# 2 % of the samples plus 3 sigma may go unnamed.
if after - min(named, after) > allowed_misses(after, 0.02):
    anon = {}
    for r in user:
        if r["app"].startswith("{") or r["image"].startswith("{"):
            anon[r["app"] + " " + r["image"]] = anon.get(r["app"] + " " + r["image"], 0) + r["samples"]
    print("unnamed:", anon)
    print("FAIL: fewer than 98 % of user samples are named"); ok = False
sys.exit(0 if ok else 1)
EOF
echo "PASS"
