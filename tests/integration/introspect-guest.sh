#!/bin/bash
# Kernel symbols and processes from the guest's own memory
# (docs/introspection.md): opvm
# run boots the test image (QEMU TCG) with opvm.kmod=0, so no opvm.ko, no
# relay and no channel records, and --no-image-symbols, so the session names
# no System.map, vmlinux or guest root; opvm report runs with no symbol
# flag and --no-host-kernel.  What names kernel code is then only what
# introspection read: the VMCOREINFO page found in guest RAM and kallsyms
# decoded through the kernel's page tables.  Asserts:
#  - session.json "introspect" is ready, found VMCOREINFO, decoded every
#    symbol kallsyms_num_syms counts (none bad), sent >= 20000 text symbols
#    as KSYMS, and "kernel" names the release with source "introspection";
#  - <guest>/kallsyms is private and matches the image's System.map shifted
#    by the KASLR offset VMCOREINFO gave, for every text symbol (ground
#    truth: the same kernel's link-time map);
#  - >= 99 % of the kernel's samples (but firmware/boot code, which has no
#    symbols by nature; at least 50; one may miss) resolve to a symbol;
#  - control: the same session without that kallsyms names < 5 % of them;
#  - the process list (init_task's, through the guest's BTF) was walked
#    every sync with nothing cut or refused, and all user samples but 2 %
#    (or 2) are filed under a named process, abratio's under abratio
#    (without introspection all of them are {anon-cr3:...});
#  - the same under `opvm attach --qmp` to a QEMU started by hand (no
#    channel, no opvm.ko), whose kernel was found long before the attach:
#    >= 99 % of kernel samples named, user samples under their process as
#    above.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp introspect-guest
S=$T/session
export DEBUGINFOD_URLS=

"$OPVM" run --workload abratio --append "quiet opvm.kmod=0 opvm.args=5" --no-image-symbols -F 200 \
	-d "$S" > "$T/run.out" 2> "$T/run.err" ||
	{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
grep -aq "OPVM-TRUTH exit workload=abratio rc=0" "$G/console.log" ||
	fail "abratio did not finish (see $G/console.log)"
grep -aq "OPVM-READY kmod=0" "$G/console.log" || fail "opvm.ko was loaded: the test needs opvm.kmod=0"
[ -f "$G/kallsyms" ] || { cat "$T/run.out"; fail "no $G/kallsyms: introspection named no kernel symbol"; }
[ "$(stat -c %a "$G/kallsyms")" = 600 ] || fail "$G/kallsyms is not private"

"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report"; }
cp -a "$S" "$T/control" && rm "$T/control/guests/guest/kallsyms"
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/control" > "$T/c.json" \
	2> "$T/c.err" || { cat "$T/c.err"; fail "opvm report (control)"; }

python3 - "$T/r.json" "$T/c.json" "$G/samples/current/session.json" "$G/kallsyms" \
	"$IMG/System.map" <<'PY' || exit 1
import json, sys
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
if sj["fetch"]["ksyms"]["done"] != 1 or sj["fetch"]["ksyms"]["bad"]:
    print("FAIL: the KSYMS transfer did not complete: %s" % sj["fetch"]["ksyms"]); ok = False

# ground truth: the link-time map plus the slide, symbol by symbol
slide = int(i["kernel_offset"], 16)
truth = {}
for line in open(sys.argv[5]):
    a, t, n = line.split()[:3]
    if t in "tTwW":
        truth.setdefault(n, set()).add(int(a, 16) + slide)
got = wrong = 0
for line in open(sys.argv[4]):
    a, t, n = line.split()[:3]
    if n in truth:
        got += 1
        wrong += int(a, 16) not in truth[n]
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
# count-aware: the sampler's share of a loaded host varies; at least 50
if tot < 50 or tot - named > max(1, 0.01 * tot):
    print("FAIL: fewer than 99 %% of kernel samples named"); ok = False
if cn >= 0.05 * max(ct, 1):
    print("FAIL: the control names kernel samples without introspection"); ok = False

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
ab = sum(x["samples"] for x in user if x["app"] == "abratio" or x["app"].endswith("/abratio"))
print("RESULT user samples in a named process: %.1f %% (%d of %d); abratio %d, "
      "{anon-cr3:...} %d" % (100.0 * (ut - anon) / max(ut, 1), ut - anon, ut, ab, anon))
# anonymous ones: a short-lived process between two walks, not chance.
# abratio's share of the named ones: boot work (init, modprobe) is named
# too, and a page-table root freed by an exiting process and taken by
# abratio's new mm keeps the old name until the next walk (at most a sync,
# 1 s): seen once at 817 of 960 under a loaded host.  Known gap
# (docs/introspection.md); 75 % still catches processes not being told apart.
if ut < 10 or anon > max(2, 0.02 * ut) or ab < 0.75 * (ut - anon):
    print("FAIL: user samples are not filed under their processes"); ok = False
sys.exit(0 if ok else 1)
PY

# ---- 2: attach --qmp to a guest without opvm.ko ----------------------------
qemu-system-x86_64 -accel tcg -m 384 -smp 2 -nodefaults -display none \
	-qmp "unix:$T/qmp,server=on,wait=off" -serial "file:$T/console.log" \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.kmod=0 opvm.workload=abratio opvm.args=60" \
	> "$T/qemu.log" 2>&1 &
CLEAN_PIDS=$!
for _ in $(seq 750); do
	grep -aq "OPVM-TRUTH abratio share" "$T/console.log" 2>/dev/null && break
	sleep 0.2
done
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "the guest did not start its workload"
"$OPVM" attach --qmp "$T/qmp" --name vm --duration 5 --no-image-symbols -F 200 -d "$T/a" \
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
print("RESULT attach --qmp, no opvm.ko: kernel found after %d empty passes, %d processes; "
      "kernel samples named %.1f %% (%d of %d), user samples in a named process %.1f %% "
      "(%d of %d)" % (i["passes"], i["processes"]["tasks"], 100.0 * kn / max(kt, 1), kn, kt,
      100.0 * (ut - anon) / max(ut, 1), ut - anon, ut))
ok = i["state"] == "ready" and kt >= 50 and kt - kn <= max(1, 0.01 * kt) and ut >= 10 and \
     anon <= max(2, 0.02 * ut)
sys.exit(0 if ok else 1)
PY
