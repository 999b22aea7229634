#!/usr/bin/env python3
"""Checks a session whose user samples had no CR3 (the perf sampler, or
OPVM_TEST_NO_CR3) and were filed by executable mapping; used by
introspect-perf.sh and introspect-nocr3.sh.

usage: introspect-bymap-check.py REPORT.json SESSION.json SAMPLES_DIR GUEST_ROOT CONSOLE

Exit 0 (pass), 1 (fail) or 77 (too few samples of abratio-pie to judge).
"""
import glob, json, math, os, re, struct, subprocess, sys
import bounds
import introspect_check

r, sj = (json.load(open(f)) for f in sys.argv[1:3])
samples_dir, root, console = sys.argv[3:6]
con = open(console, errors="replace").read()
ok = True
bm = sj.get("by_mapping")
if not bm:
    print("FAIL: session.json has no by_mapping"); sys.exit(1)
print("RESULT user samples without a CR3 by executable mapping: %d in one process, %d "
      "ambiguous, %d in no known mapping; index built %d times, %d mappings in the last, "
      "%d refused over its cap" % (bm["attributed"], bm["ambiguous"], bm["unknown"],
      bm["index_builds"], bm["index_mappings"], bm["index_over_cap"]))
if bm["index_over_cap"] or not bm["index_builds"]:
    print("FAIL: the interval index was not built"); ok = False

build_id = introspect_check.build_id


def stored_build_ids(image):
    return introspect_check.stored_build_ids(samples_dir, image)

user = [x for x in r["symbols"] if not x["kernel"]]
img = "/usr/bin/abratio-pie"
rows = [x for x in user if x["app"] == "abratio-pie"]
tot = sum(x["samples"] for x in rows)
good = sum(x["samples"] for x in rows if x["image"] == img and x["symbol"])
print("RESULT abratio-pie: %.1f %% of its %d user samples in its own process and binary "
      "with a symbol; elsewhere: %s" % (100.0 * good / max(tot, 1), tot,
      {x["image"]: x["samples"] for x in rows if not (x["image"] == img and x["symbol"])}))
other = {x["app"]: x["samples"] for x in user if x["image"] == img and x["app"] != "abratio-pie"}
if other:
    print("FAIL: abratio-pie's binary filed under other processes: %s" % other); ok = False
want, got = build_id(root + img), stored_build_ids(img)
if tot and (not want or got != {want}):
    print("FAIL: %s: samples stored with build-id %s, the file has %s" % (img, got, want))
    ok = False
if tot < 10:
    # the host's load decides how many samples the workload gets (a busy host's gdbstub round trip is ~100 times an idle one's);
    # one miss allowed and a 3-sigma split are the tolerance from 10 on
    print("SKIP: only %d samples of abratio-pie: too few to judge (a loaded host)" % tot)
    sys.exit(1 if not ok else 77)
# one may miss: the first sample after its exec, before the next walk
# names the new image, is held and then in {unmapped}
if tot - good > max(1, 0.01 * tot):
    print("FAIL: fewer than 99 %% of abratio-pie's user samples in its own binary"); ok = False
fa = sum(x["samples"] for x in rows if x["image"] == img and x["symbol"] == "func_a")
fb = sum(x["samples"] for x in rows if x["image"] == img and x["symbol"] == "func_b")
truth = float(re.search(r"OPVM-TRUTH abratio share func_a=\S+ func_b=(\S+)", con).group(1))
n = fa + fb
share = fb / max(n, 1)
tol = bounds.share_tol(truth, n, 0.01)
print("RESULT abratio-pie func_b share of func_a + func_b: %.2f %% of %d (truth %.2f %%, "
      "allowed +- %.2f pp)" % (100 * share, n, 100 * truth, 100 * tol))
if abs(share - truth) > tol:
    print("FAIL: abratio-pie's func_a/func_b split is off its truth"); ok = False

# the static abratio sits inside busybox's mapping (init maps it the whole
# time): never named, always ambiguous
if "OPVM-TRUTH exit workload=abratio rc=0" in con:
    named = sum(x["samples"] for x in user if x["app"] == "abratio" or
                x["image"] == "/usr/bin/abratio")
    amb = sum(x["samples"] for x in user if x["app"] == "{ambiguous}")
    print("RESULT static abratio (at busybox's addresses): %d samples under abratio, %d "
          "{ambiguous} in the session" % (named, amb))
    if named:
        print("FAIL: samples of an address two processes map were given to one"); ok = False
    if bm["ambiguous"] != amb:
        print("FAIL: by_mapping.ambiguous %d, {ambiguous} holds %d" % (bm["ambiguous"], amb))
        ok = False
sys.exit(0 if ok else 1)
