#!/bin/bash
# Kernel symbols and processes from the guest's own memory
# (docs/introspection.md): opvm
# run boots the test image (QEMU TCG) with opvm.kmod=0, so no opvm.ko, no
# relay and no channel records, and --no-image-symbols, so the session names
# no System.map, vmlinux or guest root; opvm report runs with no symbol
# flag and --no-host-kernel.  What names kernel code is then only what
# introspection read: the VMCOREINFO page found in guest RAM and kallsyms
# decoded through the kernel's page tables.  User binaries come from the
# image's root (--guest-root) by the build-ids introspection read from the
# processes' own mappings.  Workloads abratio, libcmix, threads.  Asserts:
#  - session.json "introspect" is ready, found VMCOREINFO, decoded every
#    symbol kallsyms_num_syms counts (none bad), sent >= 20000 text symbols
#    as KSYMS, and "kernel" names the release with source "introspection";
#  - <guest>/kallsyms is private and matches the image's System.map shifted
#    by the KASLR offset VMCOREINFO gave, for every text symbol (ground
#    truth: the same kernel's link-time map);
#  - >= 99 % of the kernel's samples (but firmware/boot code, which has no
#    symbols by nature; at least 10; one may miss) resolve to a symbol;
#  - control: the same session without that kallsyms names < 5 % of them;
#  - the process list (init_task's, through the guest's BTF) was walked
#    (at each of the first 10 syncs, then on change) with nothing cut or
#    refused, and all user samples but 2 %
#    (or 2) are filed under a named process (without introspection all of
#    them are {anon-cr3:...});
#  - mappings (each mm's maple tree): read with nothing refused; >= 99 % of
#    abratio's, libcmix's and threads' user samples (one may miss) are in
#    their own binary (libc and ld.so for the dynamic ones) with a symbol,
#    and each such image's sample file carries the build-id of the file in
#    the image's root (so symbols came by build-id); abratio's func_a/func_b
#    split within 1 pp of the workload's truth (3 sigma when fewer than ~900
#    samples make 1 pp less than that);
#  - kernel samples are filed under their task (each vCPU's current-task
#    pointer read in the gdbstub's stop): idle, kernel threads and
#    processes; under vmlinux only those taken before introspection knew
#    where the pointers are (early boot), and each pointer read names a
#    task (1 % or 2 may fail);
#  - the same under `opvm attach --qmp` to a QEMU started by hand (no
#    channel, no opvm.ko), whose kernel was found long before the attach:
#    >= 99 % of kernel samples named, user samples under their process as
#    above, abratio's in /usr/bin/abratio with symbols, kernel samples
#    under their task.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp introspect-guest
S=$T/session
export DEBUGINFOD_URLS=
# the image's root without the System.map kept beside it (symres finds
# <root>/../System.map): user binaries only
mkdir "$T/gr" && cp -a "$IMG/root" "$T/gr/" || fail "cannot copy $IMG/root"
GR=$T/gr/root

"$OPVM" run --workload "abratio:5+libcmix:4+threads:4" --append "quiet opvm.kmod=0" \
	--no-image-symbols --guest-root "$GR" -F 200 -d "$S" > "$T/run.out" 2> "$T/run.err" ||
	{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
for w in abratio libcmix threads; do
	grep -aq "OPVM-TRUTH exit workload=$w rc=0" "$G/console.log" ||
		fail "$w did not finish (see $G/console.log)"
done
grep -aq "OPVM-READY kmod=0" "$G/console.log" || fail "opvm.ko was loaded: the test needs opvm.kmod=0"
[ -f "$G/kallsyms" ] || { cat "$T/run.out"; fail "no $G/kallsyms: introspection named no kernel symbol"; }
[ "$(stat -c %a "$G/kallsyms")" = 600 ] || fail "$G/kallsyms is not private"

"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report"; }
cp -a "$S" "$T/control" && rm "$T/control/guests/guest/kallsyms"
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/control" > "$T/c.json" \
	2> "$T/c.err" || { cat "$T/c.err"; fail "opvm report (control)"; }

PYTHONPATH="$(dirname "$0")" python3 - "$T/r.json" "$T/c.json" "$G/samples/current/session.json" "$G/kallsyms" \
	"$IMG/System.map" "$G/samples/current" "$GR" "$G/console.log" <<'PY' || exit 1
import glob, json, math, os, re, struct, subprocess, sys
import bounds
import introspect_check
r, c, sj = (json.load(open(f)) for f in sys.argv[1:4])
ok = True
i, k = sj["introspect"], sj["kernel"]
print("RESULT introspection: VMCOREINFO at %s after %d empty passes (%d MiB scanned), "
      "kernel %s, KASLR offset %s, %d of %d symbols sent as text, %d bad, decoded in %d ms" % (
      i["vmcoreinfo_gpa"], i["passes"], i["scanned_bytes"] >> 20, i["release"],
      i["kernel_offset"], i["ksyms_sent"], i["kallsyms_syms"], i["ksyms_bad"], i["kallsyms_ms"]))
if i["state"] != "ready" or i["ksyms_sent"] < 20000 or i["ksyms_bad"] or i["refused"]:
    print("FAIL: introspection did not decode the kernel's symbols: %s" % i); ok = False
if not k or k.get("source") != "introspection" or not k["release"].startswith("6."):
    print("FAIL: session.json kernel is not introspection's: %s" % k); ok = False
# vmlinux's transfer, then one of the modules' per change of their set
if sj["fetch"]["ksyms"]["done"] != 1 + i["modules"]["transfers"] or sj["fetch"]["ksyms"]["bad"]:
    print("FAIL: the KSYMS transfer did not complete: %s" % sj["fetch"]["ksyms"]); ok = False

# ground truth: the link-time map plus the slide, symbol by symbol
slide = int(i["kernel_offset"], 16)
got, wrong = introspect_check.kallsyms_vs_map(sys.argv[4], sys.argv[5], slide)
print("RESULT kallsyms from guest memory vs System.map + KASLR offset: %d symbols compared, "
      "%d at another address" % (got, wrong))
if got < 20000 or wrong:
    print("FAIL: the decoded symbols do not match the kernel's map"); ok = False

def kernel(d):
    rows = [x for x in d["symbols"] if x["kernel"] and x["image"] == "vmlinux"
            and x["app"] != "(firmware/boot)"]
    return sum(x["samples"] for x in rows if x["symbol"]), sum(x["samples"] for x in rows)
named, tot = kernel(r)
cn, ct = kernel(c)
print("RESULT kernel samples named with no opvm.ko and no System.map: %.1f %% (%d of %d); "
      "control without introspection's kallsyms: %.1f %% (%d of %d)" % (
      100.0 * named / max(tot, 1), named, tot, 100.0 * cn / max(ct, 1), cn, ct))
# count-aware: the sampler's share of a loaded host varies (a busy host's
# gdbstub round trip is ~100 times an idle one's: a third of the samples or
# less); the floor of 10 only says the kernel was sampled, the misses are
# the verdict
if tot < 10 or tot - named > max(1, 0.01 * tot):
    print("FAIL: fewer than 99 %% of kernel samples named"); ok = False
if cn >= 0.05 * max(ct, 1):
    print("FAIL: the control names kernel samples without introspection"); ok = False

# each sample's task from the vCPU's current-task pointer, read in the stop
cur = i["current"]
kapps = {}
for x in r["symbols"]:
    if x["kernel"] and x["app"] != "(firmware/boot)":
        kapps[x["app"]] = kapps.get(x["app"], 0) + x["samples"]
vml, ktot = kapps.get("vmlinux", 0), sum(kapps.values())
idle = kapps.get("(idle)", 0) + kapps.get("{idle}", 0)
kth = kapps.get("{kthread}", 0)
procs = {a: n for a, n in kapps.items() if a not in ("vmlinux", "(idle)", "{idle}", "{kthread}")}
print("RESULT kernel samples under a task (current task read in the stop): %d of %d; "
      "under vmlinux without a process %d (%.1f %%), all taken before introspection knew "
      "where to read (%d such); idle %d, kthreads %d, processes %s; %d named by it, %d "
      "pointers refused" % (ktot - vml, ktot, vml, 100.0 * vml / max(ktot, 1),
      cur["kernel_samples_without_task"], idle, kth, procs, cur["samples_named"], cur["bad"]))
# every kernel sample under vmlinux is one of those taken before the
# pointers were known (early boot: VMCOREINFO is written at subsys_initcall
# and found within a pass); once known, each pointer names a task
# (at least 10 named: the reads ran; the bad pointers are the verdict)
if cur["samples_named"] < 10 or cur["bad"] > max(2, 0.01 * cur["samples_named"]):
    print("FAIL: the current task was not read in the stops: %s" % cur); ok = False
if vml > cur["kernel_samples_without_task"] + max(2, 0.01 * ktot):
    print("FAIL: kernel samples under vmlinux although their task was read"); ok = False
# hundreds of idle and kernel-thread samples in every idle-host run seen,
# a third or less of that on a busy one; at least one process's kernel
# work (init, modprobe, abratio: ~10 a run).  The claim is that each kind
# is there: a handful of each says so whatever the host's speed
if idle < 3 or kth < 3 or not procs:
    print("FAIL: kernel samples are not under idle, kernel threads and processes"); ok = False

p = i["processes"]
print("RESULT processes from guest memory: %d in the last walk, %d walks (%d cut, %d bad "
      "pointers), %d PROC / %d EXEC / %d PROC_EXIT sent, last refresh %d us, BTF %d bytes" % (
      p["tasks"], p["walks"], p["walks_cut"], p["walks_bad_ptr"], p["procs_sent"],
      p["execs_sent"], p["exits_sent"], p["refresh_us"], p["btf_bytes"]))
if p["tasks"] < 10 or p["walks"] < 2 or p["walks_cut"] or p["walk_failed"] or p["dups"]:
    print("FAIL: the process list was not walked cleanly: %s" % p); ok = False
user = [x for x in r["symbols"] if not x["kernel"]]
ut = sum(x["samples"] for x in user)
anon = sum(x["samples"] for x in user if x["app"].startswith("{anon-cr3:"))
print("RESULT user samples in a named process: %.1f %% (%d of %d); {anon-cr3:...} %d" % (
      100.0 * (ut - anon) / max(ut, 1), ut - anon, ut, anon))
# anonymous ones: a short-lived process between two walks, not chance
if ut < 10 or anon > max(2, 0.02 * ut):
    print("FAIL: user samples are not filed under their processes"); ok = False

m = i["mappings"]
print("RESULT mappings from guest memory: %d trees read (%d unchanged, %d deferred), %d "
      "nodes, %d VMAs, %d MMAP / %d MUNMAP / %d COOKIE sent, %d without build-id (%d read "
      "later), last "
      "refresh %d us; refused: %d bad trees, %d cut, %d bad VMAs, %d bad paths" % (
      m["procs_read"], m["procs_unchanged"], m["procs_deferred"], m["nodes"], m["vmas"],
      m["maps_sent"], m["munmaps_sent"], m["cookies_sent"], m["buildid_missing"],
      m["buildid_late"], m["refresh_us"], m["tree_bad"], m["tree_cut"], m["vma_bad"], m["path_bad"]))
if not m["read"] or m["maps_sent"] < 3 or m["tree_bad"] or m["tree_cut"] or m["path_bad"]:
    print("FAIL: the mappings were not read cleanly: %s" % m); ok = False

build_id = introspect_check.build_id


def stored_build_ids(image):
    return introspect_check.stored_build_ids(sys.argv[6], image)

binaries = {"abratio": {"/usr/bin/abratio"},
            "libcmix": {"/usr/bin/libcmix"}, "threads": {"/usr/bin/threads"}}
shared = {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"}
few = 0
for w, own in binaries.items():
    rows = [x for x in user if x["app"] == w]
    tot = sum(x["samples"] for x in rows)
    good = sum(x["samples"] for x in rows if x["symbol"] and
               (x["image"] in own or (w != "abratio" and x["image"] in shared)))
    print("RESULT %s: %.1f %% of its %d user samples in its binaries with a symbol; "
          "elsewhere: %s" % (w, 100.0 * good / max(tot, 1), tot,
          {x["image"]: x["samples"] for x in rows if x["samples"] and not (x["symbol"] and
           (x["image"] in own or (w != "abratio" and x["image"] in shared)))}))
    other = {x["app"]: x["samples"] for x in user if x["image"] in own and x["app"] != w}
    if other:
        print("NOTE: %s's binary sampled under other processes: %s (a page-table root "
              "reused before the next walk: docs/introspection.md)" % (w, other))
    # the host's load decides how many samples a 4 s workload gets (a busy
    # host's gdbstub round trip is ~100 times an idle one's): one with fewer
    # than 5 is not judged (said), but two of three must be; with few
    # samples the one miss allowed is the tolerance; the misses a 1 %
    # rate allows are count-aware (4 of 342 in {anon}, mappings walked
    # after the hold, once failed a fixed 1 % beside two busy loops)
    if tot < 5:
        print("NOTE: only %d samples of %s: not judged" % (tot, w)); few += 1
    elif tot - good > max(1, bounds.allowed_misses(tot, 0.01)):
        print("FAIL: fewer than 99 %% of %s's user samples in its binaries" % w); ok = False
    for img in sorted({x["image"] for x in rows if x["image"] in own | shared}):
        want, got = build_id(sys.argv[7] + img), stored_build_ids(img)
        if not want or got != {want}:
            print("FAIL: %s: samples stored with build-id %s, the file has %s" % (
                  img, got, want)); ok = False

if few > 1:
    print("FAIL: %d of 3 workloads got fewer than 5 samples" % few); ok = False
ab = [x for x in user if x["app"] == "abratio" and x["image"] == "/usr/bin/abratio"]
fb = sum(x["samples"] for x in ab if x["symbol"] == "func_b")
fa = sum(x["samples"] for x in ab if x["symbol"] == "func_a")
# the truth is the split of the time between the two functions (the rest
# of abratio, its loop and clock reads, is not in it)
tot = fa + fb
truth = float(re.search(r"OPVM-TRUTH abratio share func_a=\S+ func_b=(\S+)",
                        open(sys.argv[8], errors="replace").read()).group(1))
share = fb / max(tot, 1)
tol = bounds.share_tol(truth, tot, 0.01)
print("RESULT abratio func_b share of func_a + func_b: %.2f %% of %d samples (truth %.2f %%, "
      "allowed +- %.2f pp)" % (100 * share, tot, 100 * truth, 100 * tol))
if abs(share - truth) > tol:
    print("FAIL: abratio's func_a/func_b split is off its truth"); ok = False
sys.exit(0 if ok else 1)
PY

# ---- 2: attach --qmp to a guest without opvm.ko ----------------------------
qemu-system-x86_64 -accel tcg -m 384 -smp 2 -nodefaults -display none \
	-qmp "unix:$T/qmp,server=on,wait=off" -serial "file:$T/console.log" \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.kmod=0 opvm.workload=abratio opvm.args=60" \
	> "$T/qemu.log" 2>&1 &
CLEAN_PIDS=$!
wait_for "$T/console.log" "OPVM-TRUTH abratio share"
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "the guest did not start its workload"
"$OPVM" attach --qmp "$T/qmp" --name vm --duration 5 --no-image-symbols --guest-root "$GR" \
	-F 200 -d "$T/a" \
	> "$T/attach.out" 2>&1 || { cat "$T/attach.out"; fail "opvm attach failed"; }
grep -q "introspection: kernel" "$T/attach.out" ||
	{ cat "$T/attach.out"; fail "the attach summary does not say what introspection found"; }
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/a" > "$T/a.json" 2> "$T/a.err" ||
	{ cat "$T/a.err"; fail "opvm report (attach)"; }
python3 - "$T/a.json" "$T/a/guests/vm/samples/current/session.json" <<'PY' || exit 1
import json, sys
r, sj = (json.load(open(f)) for f in sys.argv[1:3])
i = sj["introspect"]
rows = [x for x in r["symbols"] if x["kernel"] and x["image"] == "vmlinux"
        and x["app"] != "(firmware/boot)"]
kt = sum(x["samples"] for x in rows)
kn = sum(x["samples"] for x in rows if x["symbol"])
user = [x for x in r["symbols"] if not x["kernel"]]
ut = sum(x["samples"] for x in user)
anon = sum(x["samples"] for x in user if x["app"].startswith("{anon-cr3:"))
ab = sum(x["samples"] for x in user if x["app"] == "abratio")
abin = sum(x["samples"] for x in user if x["app"] == "abratio" and
           x["image"] == "/usr/bin/abratio" and x["symbol"])
print("RESULT attach --qmp, abratio's user samples in /usr/bin/abratio with a symbol: "
      "%.1f %% (%d of %d)" % (100.0 * abin / max(ab, 1), abin, ab))
cur = i["current"]
vml = sum(x["samples"] for x in rows if x["app"] == "vmlinux")
print("RESULT attach --qmp, no opvm.ko: kernel found after %d empty passes, %d processes; "
      "kernel samples named %.1f %% (%d of %d), user samples in a named process %.1f %% "
      "(%d of %d); kernel samples under a task %d of %d (%d before the pointers were told "
      "to the sampler), %d named by the current task" % (i["passes"], i["processes"]["tasks"],
      100.0 * kn / max(kt, 1), kn, kt, 100.0 * (ut - anon) / max(ut, 1), ut - anon, ut,
      kt - vml, kt, cur["kernel_samples_without_task"], cur["samples_named"]))
# the floors (10 kernel, 10 user, 10 abratio samples, 10 named by the
# current task) only say each path ran: a busy host's gdbstub round trip
# is ~100 times an idle one's and a 5 s attach gets a third of the
# samples or less; the misses allowed are the verdict
ok = i["state"] == "ready" and kt >= 10 and kt - kn <= max(1, 0.01 * kt) and ut >= 10 and \
     anon <= max(2, 0.02 * ut) and ab >= 10 and ab - abin <= max(1, 0.01 * ab)
# the attach's first second, before the first sync told the sampler
if cur["samples_named"] < 10 or \
   vml > cur["kernel_samples_without_task"] + max(2, 0.01 * kt):
    print("FAIL: the current task did not name the kernel samples: %s" % cur); ok = False
sys.exit(0 if ok else 1)
PY
