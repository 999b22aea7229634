#!/bin/bash
# A first session as a new user has it: no symbol flags (--no-image-symbols:
# not even the test image's root or System.map), an empty build-id cache,
# `opvm run --call-graph dwarf`, the callpaths workload (hot_leaf reached
# through libc's qsort on one path) then the syscalls workload:
#   - first-session stacks: the binaries arrive by build-id during the
#     session, and >= 90 % of the qsort-callback stacks (cmp_c) still reach
#     main (before: every one ended in libc's msort_with_tmp); session.json
#     counts the unwinds that waited and those cut short;
#   - kernel stacks without a System.map: the guest's kallsyms locate its
#     ORC tables, and >= 90 % of the syscalls process's system-call stacks
#     go on into the user task;
#   - kernel time belongs to its process by default: the syscalls process's
#     kernel samples are filed under it (report text and JSON, folded
#     export), and `--separate lib` still gives OProfile's layout (the
#     kernel an application of its own).
# Every minimum is derived from what the run sampled, never a fixed count
# (a busy host takes fewer samples): the shares the workloads' truth gives
# (path_c half of callpaths' work, syscalls mostly in the kernel), at 3
# sigma of the binomial count (tests/integration/bounds.py).
# About 45 s: two boots under TCG.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-first-session

"$OPVM" run --workload "callpaths:${CALLPATHS_SECONDS:-8}+syscalls:4" -F 200 --call-graph dwarf \
	--no-image-symbols --fetch-cache "$T/cache" -d "$T/s" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run --call-graph dwarf"; }
grep -A3 -E "kernel stacks|user stacks \(dwarf\)|from the guest" "$T/run.out"
"$OPVM" report -d "$T/s" --format json > "$T/r.json" || fail "report --format json"
"$OPVM" report -d "$T/s" -l > "$T/r.txt" 2>&1 || { cat "$T/r.txt"; fail "report -l"; }
"$OPVM" export -d "$T/s" --format folded -o "$T/s.folded" > /dev/null 2>&1 || fail "export folded"

# OProfile's layout, by option (a short run, no call graphs)
"$OPVM" run --workload syscalls:2 -F 100 --separate lib -d "$T/old" > "$T/old.out" 2>&1 ||
	{ cat "$T/old.out"; fail "opvm run --separate lib"; }
"$OPVM" report -d "$T/old" -l --format json > "$T/old.json" || fail "report (--separate lib)"

python3 - "$T/r.json" "$T/s/guests/guest/samples/current/session.json" "$T/r.txt" \
	"$T/s.folded" "$T/old.json" "$T/old/guests/guest/samples/current/session.json" \
	"$T/run.out" <<'PY' || fail "first session"
import json, re, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo
rep, sess, txt, folded, old, old_sess, out = sys.argv[1:8]
j, s = json.load(open(rep)), json.load(open(sess))
fails = []
if s["symbols"]["system_map"] or s["symbols"]["guest_roots"]:
    fails.append("the session had symbol sources: %r" % s["symbols"])

# first-session stacks through qsort: path_c does half of callpaths' work
# (its truth), so at least 40 % of its user stacks pass through cmp_c
c = main_c = ncp = 0
for st in j["stacks"]:
    fr = [f["symbol"] or "" for f in st["frames"]]
    if st["app"].endswith("/callpaths") and not st["frames"][0]["kernel"]:
        ncp += st["samples"]
    if st["app"].endswith("/callpaths") and "cmp_c" in fr:
        c += st["samples"]
        main_c += st["samples"] if "main" in fr else 0
d = s.get("dwarf_unwind", {})
fb = s["fetch"]["binaries"]
print("RESULT first session: %d of %d qsort-callback stacks reach main (%.1f %%); "
      "binaries fetched %d, cached before %d; unwinds %d, waited %d, whole once the "
      "binary came %d, cut short for a missing binary %d"
      % (main_c, c, 100.0 * main_c / max(c, 1), fb["files"], fb["cached"], d.get("unwinds", 0),
         d.get("waited", 0), d.get("redone", 0), d.get("cut_missing_binary", 0)))
print("RESULT callpaths: %d user stacks, %d through cmp_c (at least %.0f expected)"
      % (ncp, c, count_lo(ncp, 0.40)))
if not c or c < count_lo(ncp, 0.40) or main_c < count_lo(c, 0.90):
    fails.append("%d of %d qsort-callback stacks reach main (%d callpaths user stacks)"
                 % (main_c, c, ncp))
if fb["cached"] or not fb["files"]:
    fails.append("the build-id cache was not empty, or nothing was fetched")
for k in ("waited", "redone", "cut_missing_binary", "waiting"):
    if k not in d:
        fails.append("session.json dwarf_unwind has no %s" % k)
if d.get("waiting"):
    fails.append("%d stacks still waiting at the end" % d["waiting"])
dropped = s["store"].get("stacks_dropped", 0)
if j.get("stack_samples", 0) + dropped != j["total_samples"]:
    fails.append("stack table %s + %d dropped != %d samples"
                 % (j.get("stack_samples"), dropped, j["total_samples"]))

# kernel stacks without a System.map
sysc = reach = nsys = 0
for st in j["stacks"]:
    if st["app"].endswith("/syscalls"):
        nsys += st["samples"]
    if not st["app"].endswith("/syscalls") or not st["frames"][0]["kernel"]:
        continue
    names = [f["symbol"] or "" for f in st["frames"]]
    if any(x.startswith("entry_SYSCALL_64") or x == "do_syscall_64" for x in names):
        sysc += st["samples"]
        reach += st["samples"] if any(not f["kernel"] for f in st["frames"]) else 0
print("RESULT kernel stacks with no System.map: %d of %d system-call stacks of syscalls "
      "reach the user task (%.1f %%)" % (reach, sysc, 100.0 * reach / max(sysc, 1)))
# syscalls spends most of its time in the kernel (its truth: 0.8-0.9):
# at least half of its stacks are system calls
if not sysc or sysc < count_lo(nsys, 0.5) or reach < count_lo(sysc, 0.90):
    fails.append("system-call stacks reaching the caller: %d of %d" % (reach, sysc))
if "located by its kallsyms" not in open(out).read():
    fails.append("the summary does not say the ORC tables came from kallsyms")

# kernel time under its process
def kern_split(rows):
    mine = sum(r["samples"] for r in rows if r["kernel"] and r["app"].endswith("/syscalls"))
    bare = sum(r["samples"] for r in rows if r["kernel"] and r["app"] == "vmlinux")
    return mine, bare
mine, bare = kern_split(j["symbols"])
user = sum(r["samples"] for r in j["symbols"] if not r["kernel"] and r["app"].endswith("/syscalls"))
print("RESULT default (%s): syscalls kernel %d, user %d samples; kernel without a process "
      "(app vmlinux) %d" % (s["separate"], mine, user, bare))
if s["separate"] != "lib,kernel" or not mine or mine < count_lo(mine + user, 0.5):
    fails.append("kernel time is not filed under syscalls (%s, %d samples)" % (s["separate"], mine))
t = open(txt).read()
# a row of the kernel's under syscalls (which kernel function is the leaf
# of how many of its few samples a loaded host leaves is chance; the
# folded stacks below must pass through do_syscall_64)
if not re.search(r"^\d+ +[\d.]+ +vmlinux +syscalls +\S+$", t, re.M):
    fails.append("report -l has no 'vmlinux syscalls FUNCTION' row")
fk = sum(int(l.rsplit(" ", 1)[1]) for l in open(folded)
         if l.split(";")[1:2] == ["syscalls"] and "do_syscall_64" in l)
if not fk or fk < count_lo(mine, 0.5):
    fails.append("the folded export has %d kernel samples under syscalls" % fk)
o, os_ = json.load(open(old)), json.load(open(old_sess))
omine, obare = kern_split(o["symbols"])
ouser = sum(r["samples"] for r in o["symbols"] if not r["kernel"] and r["app"].endswith("/syscalls"))
print("RESULT --separate lib (%s): syscalls kernel %d, app vmlinux %d samples, syscalls user %d"
      % (os_["separate"], omine, obare, ouser))
if os_["separate"] != "lib" or omine or not obare or obare < count_lo(obare + ouser, 0.5):
    fails.append("--separate lib did not give OProfile's layout")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
exit 0
