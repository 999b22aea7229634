#!/bin/bash
# The perf sampler backend on a built-in VMM guest seen from outside:
# `opvm run --vmm=kvm` boots the synthetic guest (guest-perf.elf: two
# processes on the same ring-3 addresses in two address spaces, ~800 task
# switches logged in opvm.ko's switch-ring format), and a separate
# `opvm attach --pid PID` samples its vCPU thread with host perf (cpu-clock:
# this host has no PMU), never stopping it, and names each sample's task by
# joining its time with the guest's switch ring.  Asserted:
#   - the A:B split of user samples is within 2 percentage points of the
#     guest's own truth (its vCPU thread's CPU time per process);
#   - >= 99.5 % of user samples are in the right address space (func_a only
#     in process 1, func_b only in process 2), and >= 99.5 % were named;
#   - host-mode samples filed: 0 (every filed sample is a guest one, and
#     every user sample resolves inside the guest's /user.elf);
#   - the summary and session.json say sampler perf, event cpu-clock.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/kvm-perf-attach.$$
VMM=
cleanup() {
	[ -n "$VMM" ] && kill "$VMM" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T"

[ -e /dev/kvm ] || { echo "SKIP: no /dev/kvm on this host"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to read the JSON report"; exit 77; }
if [ ! -f "$G/guest-perf.elf" ]; then
	make -s guests BUILD="$BUILD" >/dev/null || { echo "FAIL: cannot build the guests"; exit 1; }
fi

"$OPVM" run --vmm=kvm --kernel "$G/guest-perf.elf" --mem 64 -d "$T/run" >"$T/run.out" 2>&1 &
VMM=$!
# The descriptor appears once the vCPUs run.
for _ in $(seq 100); do
	[ -n "$(ls /run/opvm/vmm-$VMM "${XDG_RUNTIME_DIR:-/nonexistent}/opvm/vmm-$VMM" \
		"/tmp/opvm-$(id -u)/vmm-$VMM" 2>/dev/null)" ] && break
	kill -0 "$VMM" 2>/dev/null || break
	sleep 0.1
done
if ! timeout 300 "$OPVM" attach --pid "$VMM" -d "$T/att" --separate thread -F 4000 >"$T/att.out" 2>&1; then
	if tr '\n' ' ' < "$T/run.out" | tr -s ' ' | grep -q "cannot use KVM here"; then
		echo "SKIP: $(grep -m1 'cannot use KVM' "$T/run.out")"; exit 77
	fi
	echo "FAIL: opvm attach --pid failed"; cat "$T/att.out" "$T/run.out"; exit 1
fi
wait "$VMM"; rc=$?
VMM=
cat "$T/att.out"
[ $rc -eq 0 ] || { echo "FAIL: the guest's VMM exited with $rc"; cat "$T/run.out"; exit 1; }
CON=$T/run/guests/guest/console.log
grep -q "synthetic guest: done" "$CON" || { echo "FAIL: guest did not finish"; cat "$CON"; exit 1; }
grep -q "sampler perf, event cpu-clock;" "$T/att.out" || { echo "FAIL: the summary does not say sampler perf, event cpu-clock"; exit 1; }
"$OPVM" report --session-dir "$T/att" --separate thread -l --format json \
	--guest-root "$G" >"$T/report.json" 2>"$T/report.err" ||
	{ echo "FAIL: opvm report"; cat "$T/report.err"; exit 1; }

python3 "$(dirname "$0")/kvm-perf-check.py" kvm-perf-attach "$T/report.json" "$CON" "$T/att.out" || exit 1
exit 0
