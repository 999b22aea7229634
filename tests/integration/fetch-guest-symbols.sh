#!/bin/bash
# Symbols with no setup: opvm run boots the test image (QEMU TCG) with
# --no-image-symbols, so the session names no System.map, vmlinux or guest
# root, and opvm report runs with no symbol flag, --no-host-kernel and no
# debuginfod.  What names the kernel's samples is then only what the guest
# sent over its channel: the relay's KSYMS records, kept as
# <session>/guests/guest/kallsyms.  Asserts:
#  - the transfer completed (session.json fetch.ksyms: done, >= 20000
#    symbols, nothing refused) and the file is private (0600);
#  - >= 95 % of the kernel's samples (but firmware/boot code, which has no
#    symbols by nature) resolve to a symbol;
#  - control: the same session without that file names < 5 % of them, so
#    the fetched symbols are what resolved them.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp fetch-guest-symbols
S=$T/session
export DEBUGINFOD_URLS=

"$OPVM" run --workload libcmix --no-image-symbols -F 200 -d "$S" > "$T/run.out" 2> "$T/run.err"
rc=$?
[ $rc = 0 ] || { cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $rc"; }
G=$S/guests/guest
grep -aq "OPVM-TRUTH exit workload=libcmix rc=0" "$G/console.log" || fail "the workload did not finish (see $G/console.log)"
[ -f "$G/kallsyms" ] || fail "no $G/kallsyms: the guest's symbols did not arrive"
[ "$(stat -c %a "$G/kallsyms")" = 600 ] || fail "$G/kallsyms is not private: $(stat -c %a "$G/kallsyms")"

rep() {
	"$OPVM" report -l --format json --no-host-kernel --session-dir "$1"
}
rep "$S" > "$T/r.json" 2> "$T/r.err" || { cat "$T/r.err"; fail "opvm report"; }
cp -a "$S" "$T/control" && rm "$T/control/guests/guest/kallsyms"
rep "$T/control" > "$T/c.json" 2> "$T/c.err" || { cat "$T/c.err"; fail "opvm report (control)"; }

python3 - "$T/r.json" "$T/c.json" "$G/samples/current/session.json" <<'PY' || exit 1
import json, sys
sj = json.load(open(sys.argv[3]))
k = sj["fetch"]["ksyms"]
print("RESULT kernel symbols fetched: %d in %d records, %d bytes, %d transfer(s), %d refused" % (
    k["syms"], k["records"], k["bytes"], k["done"], k["bad"] + k["capped"]))
sym = sj["symbols"]
ok = True
if sym["system_map"] or sym["vmlinux"] or sym["guest_roots"]:
    print("FAIL: the session names symbol files: %s" % sym); ok = False
if k["done"] < 1 or k["syms"] < 20000 or k["bad"] or k["capped"] or k["end_mismatch"]:
    print("FAIL: the kernel symbol transfer is incomplete: %s" % k); ok = False

def kernel(path):
    d = json.load(open(path))
    rows = [r for r in d["symbols"] if r["kernel"] and r["image"] == "vmlinux"
            and r["app"] != "(firmware/boot)"]
    tot = sum(r["samples"] for r in rows) - d["outside_kernel_samples"]
    named = sum(r["samples"] for r in rows if r["symbol"])
    return named, tot

named, tot = kernel(sys.argv[1])
print("RESULT kernel samples named from fetched kallsyms: %.1f %% (%d of %d)" % (
    100.0 * named / max(tot, 1), named, tot))
cnamed, ctot = kernel(sys.argv[2])
print("RESULT control without the fetched file: %.1f %% (%d of %d)" % (
    100.0 * cnamed / max(ctot, 1), cnamed, ctot))
# ~1500 kernel samples at 200 Hz over two vCPUs: 95 % leaves room for the
# odd sample in code no text symbol covers, never for a missing table.
if tot < 200 or named < 0.95 * tot:
    print("FAIL: fewer than 95 % of kernel samples named"); ok = False
if cnamed >= 0.05 * max(ctot, 1):
    print("FAIL: the control names kernel samples without the fetched symbols"); ok = False
sys.exit(0 if ok else 1)
PY
echo PASS
