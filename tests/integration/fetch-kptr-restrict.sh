#!/bin/bash
# Kernel symbols with no setup when the guest hides them: the test image
# booted with kernel.kptr_restrict=2 (opvm.kptr_restrict=2), where
# /proc/kallsyms shows every address as 0 even to root.  The relay sees the
# zeros and hands over ("ksym" to /dev/opvm); opvm.ko walks its kernel's
# symbols with sprint_symbol() and sends the KSYMS records itself, to the
# host only (guest-kmod/ksyms.c).  --introspect off: a host with no other
# source of vmlinux's symbols asks the relay for them all (docs/protocol.md,
# KSYMS word).  Asserts:
#  - the transfer says so (fetch.ksyms: module_walk 1, done, nothing
#    refused, >= 20000 symbols), and the guest's /proc/kallsyms really was
#    all zeros (the init prints a line of it);
#  - the walk is right: every vmlinux symbol sent is in the image's
#    System.map at its address less one KASLR slide, for >= 99 % of them;
#  - >= 95 % of the kernel's samples (firmware/boot aside) and every module
#    sample resolve to a symbol with no symbol flag (--no-image-symbols, no
#    host kernel, no debuginfod), against < 5 % with the file removed.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp fetch-kptr-restrict
S=$T/session
G=$S/guests/guest
export DEBUGINFOD_URLS=

"$OPVM" run --workload abratio --append "opvm.kptr_restrict=2 opvm.dump=1" \
	--no-image-symbols --introspect off --fetch-cache "$T/cache" -F 200 -d "$S" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run failed"; }
grep -aq "OPVM-TRUTH exit workload=abratio rc=0" "$G/console.log" ||
	fail "abratio did not finish (see $G/console.log)"
grep -a "opvm: kernel symbols:" "$G/console.log" | sed 's/^/MEASURED guest: /'
[ -f "$G/kallsyms" ] || fail "no $G/kallsyms: the module's walk did not arrive"

"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report"; }
cp -a "$S" "$T/control" && rm "$T/control/guests/guest/kallsyms"
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/control" > "$T/c.json" 2> "$T/c.err" ||
	{ cat "$T/c.err"; fail "opvm report (control)"; }

python3 - "$G/samples/current/session.json" "$G/kallsyms" "$IMG/System.map" \
	"$T/r.json" "$T/c.json" "$G/console.log" <<'PY' || exit 1
import json, sys
sys.path.insert(0, "tests/integration")
from bounds import allowed_misses
sj = json.load(open(sys.argv[1]))
k = sj["fetch"]["ksyms"]
ok = True
print("RESULT kptr_restrict=2: %d symbols in %d records from opvm.ko's walk (module_walk %d, done %d, refused %d)"
      % (k["syms"], k["records"], k["module_walk"], k["done"], k["bad"] + k["capped"]))
if k["module_walk"] != 1 or k["done"] < 1 or k["syms"] < 20000 or k["bad"] or k["capped"] or k["end_mismatch"]:
    print("FAIL: the module's symbol transfer is incomplete: %s" % k); ok = False
con = open(sys.argv[6], errors="replace").read()
if "OPVM-KPTR 0000000000000000" not in con:
    print("FAIL: the guest's /proc/kallsyms was not hidden (no OPVM-KPTR 0... line)"); ok = False

smap = {}
for line in open(sys.argv[3]):
    a, t, n = line.split()[:3]
    smap.setdefault(n, set()).add(int(a, 16))
sent = [(int(a, 16), n) for a, t, n, *m in (l.split() for l in open(sys.argv[2])) if not m]
slide = {a - min(smap["startup_64"]) for a, n in sent if n == "startup_64"}
if len(slide) != 1:
    print("FAIL: startup_64 not sent once: %s" % slide); ok = False
slide = slide.pop() if slide else 0
good = sum(1 for a, n in sent if a - slide in smap.get(n, ()))
print("RESULT walk vs System.map: %d of %d vmlinux symbols at their address (KASLR slide %#x)"
      % (good, len(sent), slide))
if good < 0.99 * max(len(sent), 1):
    print("FAIL: the walk's addresses disagree with System.map"); ok = False

def kernel(d):
    rows = [r for r in d["symbols"] if r["kernel"] and r["image"] == "vmlinux"
            and r["app"] != "(firmware/boot)"]
    tot = sum(r["samples"] for r in rows) - d["outside_kernel_samples"]
    return sum(r["samples"] for r in rows if r["symbol"]), tot

def modules(d):
    rows = [r for r in d["symbols"] if r["kernel"] and r["image"] != "vmlinux"]
    return sum(r["samples"] for r in rows if r["symbol"]), sum(r["samples"] for r in rows)

r, c = json.load(open(sys.argv[4])), json.load(open(sys.argv[5]))
# misses: the rate's share of what this run sampled plus 3 sigma (a busy
# host samples fewer); the floor only says the guest ran: 10, where two
# busy loops on both cores make the gdbstub round trip ~100 times an idle
# one's and a run samples a third or less (50 judged the host's speed)
for what, f, lim, least in (("kernel", kernel, 0.95, 10), ("module", modules, 1.0, 0)):
    named, tot = f(r)
    cnamed, ctot = f(c)
    print("RESULT %s samples named under kptr_restrict=2: %.1f %% (%d of %d); control: %.1f %% (%d of %d)"
          % (what, 100.0 * named / max(tot, 1), named, tot, 100.0 * cnamed / max(ctot, 1), cnamed, ctot))
    if tot < least or tot - named > allowed_misses(tot, 1 - lim):
        print("FAIL: too few %s samples named" % what); ok = False
    if ctot and cnamed >= 0.05 * ctot:
        print("FAIL: the control names %s samples without the file" % what); ok = False
sys.exit(0 if ok else 1)
PY
echo PASS
