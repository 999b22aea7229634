#!/bin/bash
# User samples without a CR3, filed by executable mapping
# (docs/introspection.md, "The perf sampler"), on a real Linux guest: host
# perf gives no CR3, and it sees guest code only under KVM, which boots
# Linux too slowly on a nested, software-assisted host
# (introspect-perf.sh is the same test under real perf where it can).
# Here opvm run boots the test image under QEMU TCG with opvm.kmod=0 and
# OPVM_TEST_NO_CR3=1: the collector drops each user sample's CR3 and task
# before attribution, as the perf sampler delivers them, so every user
# sample is filed by the interval index of the executable mappings that
# introspection read from guest memory.  Asserts:
#  - abratio-pie (abratio as a static PIE, at an ASLR address): >= 99 % of
#    its user samples (one may miss) under its own process, in
#    /usr/bin/abratio-pie with a symbol, stored with the build-id of the
#    file in the image's root; its func_a/func_b split within 3 sigma;
#  - abratio (static, not PIE: at 0x401000 inside busybox's executable
#    mapping, which init maps the whole time): no sample under abratio,
#    they are {ambiguous}: never guessed;
#  - session.json "by_mapping" counts them, and the summary says so.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ -x "$IMG/root/usr/bin/abratio-pie" ] || skip "the test image has no abratio-pie: run 'make images'"
mk_tmp introspect-nocr3
export DEBUGINFOD_URLS=
# the image's root without the System.map beside it: user binaries only
mkdir "$T/gr" && cp -a "$IMG/root" "$T/gr/" || fail "cannot copy $IMG/root"
GR=$T/gr/root
S=$T/s

OPVM_TEST_NO_CR3=1 "$OPVM" run --workload "abratio:3+abratio-pie:6" \
	--append "quiet opvm.kmod=0" --no-image-symbols --guest-root "$GR" -F 200 -d "$S" \
	> "$T/run.out" 2> "$T/run.err" || { cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
for w in abratio abratio-pie; do
	grep -aq "OPVM-TRUTH exit workload=$w rc=0" "$G/console.log" ||
		fail "$w did not finish (see $G/console.log)"
done
grep -aq "OPVM-READY kmod=0" "$G/console.log" || fail "opvm.ko was loaded: the test needs opvm.kmod=0"
grep -q "user samples without a CR3, by executable mapping" "$T/run.out" ||
	{ cat "$T/run.out"; fail "the summary does not count the samples filed by mapping"; }
"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report"; }
python3 "$(dirname "$0")/introspect-bymap-check.py" "$T/r.json" \
	"$G/samples/current/session.json" "$G/samples/current" "$GR" "$G/console.log"
rc=$?	# 77: too few samples to judge, said (SKIP)
[ $rc = 0 ] || exit $rc
echo PASS
