#!/bin/bash
# Introspection on the kernels users run, not only the test image's
# (docs/introspection.md, "Which kernels"): the test image's workloads
# booted with another Debian release's kernel (images/kernel-image.sh:
# bullseye's 5.10, trixie's 6.12, downloaded with apt-get and cached under
# $BUILD/kernels), opvm.kmod=0, `opvm run --introspect only` with no
# System.map, no vmlinux and no kallsyms from a relay.  Per kernel:
#  - kallsyms decoded with nothing bad, from VMCOREINFO (6.0 on) or found
#    by shape in the kernel image (before 6.0), and every text symbol at
#    its System.map address (the map: that kernel's own /proc/kallsyms at
#    a boot with nokaslr) plus the KASLR offset;
#  - >= 99 % of kernel samples named (one may miss; at least 10);
#  - each vCPU's current task read in the stops (5.10: the per-CPU
#    current_task; 6.12: pcpu_hot), every pointer naming a task;
#  - the mappings read (5.10: the list of vm_next; 6.12: the maple tree)
#    with nothing refused, and >= 99 % of abratio's user samples (one may
#    miss; at least 10) in abratio's process and in /usr/bin/abratio with
#    a symbol, found by build-id from the guest root.
# Needs the network the first time and minutes under TCG: `make
# check-kernels` runs it (OPVM_KERNEL_TESTS=1); `make check` skips it.
# OPVM_TEST_SUITES picks the suites (default: bullseye trixie).
. "$(dirname "$0")/qemu-common.bash"
[ "${OPVM_KERNEL_TESTS:-0}" = 1 ] ||
	skip "other kernels' guests need a download and minutes: run make check-kernels"
need_qemu
command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 ||
	skip "apt-get and dpkg-deb are needed to fetch Debian's kernels"
mk_tmp kernels-introspect
export DEBUGINFOD_URLS=
KOUT=$(cd "$BUILD" && pwd)/kernels

for suite in ${OPVM_TEST_SUITES:-bullseye trixie}; do
	rc=0
	K=$(images/kernel-image.sh "$IMG" "$suite" "$KOUT" 2> "$T/image-$suite.log") || rc=$?
	[ $rc = 2 ] && skip "$(tail -1 "$T/image-$suite.log")"
	[ $rc = 0 ] || { cat "$T/image-$suite.log"; fail "cannot build the $suite kernel's image"; }
	S=$T/s-$suite
	# the root without the System.map beside it: user binaries only
	mkdir "$T/gr-$suite" && cp -a "$K/root" "$T/gr-$suite/" || fail "cannot copy $K/root"
	t0=$(date +%s)
	"$OPVM" run --kernel "$K/vmlinuz" --initrd "$K/initramfs.cpio.gz" --workload abratio:6 \
		--append "quiet opvm.kmod=0" --introspect only --no-image-symbols \
		--guest-root "$T/gr-$suite/root" -F 200 -d "$S" > "$T/run-$suite.out" 2>&1 ||
		{ cat "$T/run-$suite.out"; fail "opvm run ($suite) exited with $?"; }
	echo "MEASURED $suite ($(basename "$K")): opvm run took $(( $(date +%s) - t0 )) s"
	G=$S/guests/guest
	grep -aq "OPVM-TRUTH exit workload=abratio rc=0" "$G/console.log" ||
		fail "abratio did not finish under $suite's kernel (see $G/console.log)"
	"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r-$suite.json" \
		2> "$T/r-$suite.err" || { cat "$T/r-$suite.err"; fail "opvm report ($suite)"; }
	PYTHONPATH="$(dirname "$0")" python3 - "$suite" "$T/r-$suite.json" "$G/samples/current/session.json" "$G/kallsyms" \
		"$K/System.map" <<'PY' || exit 1
import json, sys
import introspect_check
suite, r, sj = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
i = sj["introspect"]
ok = True
old = suite == "bullseye"	# 5.10: before VMCOREINFO's kallsyms and the maple tree
print("RESULT %s: kernel %s, kallsyms from %s (%d MiB of the image searched, %d "
      "candidates), %d symbols, %d sent as text, %d bad, decoded in %d ms" % (
      suite, i["release"], i.get("kallsyms_from"), i.get("kallsyms_search_bytes", 0) >> 20,
      i.get("kallsyms_search_candidates", 0), i["kallsyms_syms"], i["ksyms_sent"],
      i["ksyms_bad"], i["kallsyms_ms"]))
if i["state"] != "ready" or i["ksyms_sent"] < 20000 or i["ksyms_bad"] or i["refused"] or \
   i.get("kallsyms_from") != ("search" if old else "vmcoreinfo"):
    print("FAIL: kallsyms not decoded as expected: %s" % i); ok = False
slide = int(i["kernel_offset"], 16)
got, wrong = introspect_check.kallsyms_vs_map(sys.argv[4], sys.argv[5], slide)
print("RESULT %s: decoded kallsyms vs the kernel's map + KASLR offset: %d compared, %d "
      "at another address" % (suite, got, wrong))
if got < 20000 or wrong:
    print("FAIL: the decoded symbols do not match the kernel's map"); ok = False

rows = [x for x in r["symbols"] if x["kernel"] and x["image"] == "vmlinux"
        and x["app"] != "(firmware/boot)"]
named, tot = sum(x["samples"] for x in rows if x["symbol"]), sum(x["samples"] for x in rows)
print("RESULT %s: kernel samples named with no System.map: %.1f %% (%d of %d)" % (
      suite, 100.0 * named / max(tot, 1), named, tot))
# the floors of 10 (here and below) only say the path ran: a busy host's
# gdbstub round trip is ~100 times an idle one's, a third of the samples
# or less; the misses allowed are the verdict
if tot < 10 or tot - named > max(1, 0.01 * tot):
    print("FAIL: fewer than 99 %% of kernel samples named"); ok = False

cur = i["current"]
print("RESULT %s: current task read in the stops: %d samples named, %d pointers refused, "
      "%d kernel samples before it was known" % (suite, cur["samples_named"], cur["bad"],
      cur["kernel_samples_without_task"]))
if not cur["known"] or cur["samples_named"] < 10 or cur["bad"] > max(2, 0.01 * cur["samples_named"]):
    print("FAIL: the current task was not read: %s" % cur); ok = False

m = i["mappings"]
print("RESULT %s: mappings by %s: %d MMAP, %d COOKIE, refused %d/%d/%d/%d" % (
      suite, m.get("walk"), m.get("maps_sent", 0), m.get("cookies_sent", 0),
      m.get("tree_bad", 0), m.get("tree_cut", 0), m.get("vma_bad", 0), m.get("path_bad", 0)))
if not m["read"] or m.get("walk") != ("vma_list" if old else "maple_tree") or \
   m["maps_sent"] < 1 or m["tree_bad"] or m["tree_cut"] or m["path_bad"]:
    print("FAIL: the mappings were not read cleanly: %s" % m); ok = False

user = [x for x in r["symbols"] if not x["kernel"]]
# its process's samples and its binary's anywhere else (misfiled ones)
mine = [x for x in user if x["app"] == "abratio" or x["image"] == "/usr/bin/abratio"]
tot = sum(x["samples"] for x in mine)
good = sum(x["samples"] for x in mine if x["app"] == "abratio" and
           x["image"] == "/usr/bin/abratio" and x["symbol"])
allu = sum(x["samples"] for x in user)
print("RESULT %s: abratio: %.1f %% of its %d user samples in /usr/bin/abratio with a "
      "symbol, in its process (%d user samples in all)" % (suite, 100.0 * good / max(tot, 1), tot, allu))
# at least 10: a loaded host's TCG guest gets a tenth of its samples
if tot < 10 or tot - good > max(1, 0.01 * tot):
    print("FAIL: abratio's user samples are not in its process and binary"); ok = False
sys.exit(0 if ok else 1)
PY
done
echo "PASS: kernels-introspect"
