#!/bin/bash
# `make demo`: boot the test image under QEMU (TCG), profile the abratio
# workload through the gdbstub, and report.  abratio spends 1 % of its time
# in func_a and 99 % in func_b; the report should say the same.
# Usage: tests/demo.sh [BUILD]   (the Makefile has built opvm and the image)
set -u
BUILD=${1:-build}
OPVM=$BUILD/opvm
IMG=$BUILD/images
S=$BUILD/demo-session
cd "$(dirname "$0")/.."
for f in "$OPVM" "$IMG/vmlinuz" "$IMG/initramfs.cpio.gz"; do
	[ -e "$f" ] || { echo "demo: $f is missing: run 'make' and 'make images'" >&2; exit 1; }
done
command -v qemu-system-x86_64 >/dev/null ||
	{ echo "demo: qemu-system-x86_64 is missing: run scripts/install-deps.sh" >&2; exit 1; }

echo "== opvm run --workload abratio -F 200 -d $S   (200 samples/s per vCPU: a 3 s workload)"
start=$(date +%s)
"$OPVM" run --workload abratio -F 200 -d "$S" || exit 1
echo "   ($(( $(date +%s) - start )) s, guest console in $S/guests/guest/console.log)"
echo
echo "== the guest's own account:"
grep -a "OPVM-TRUTH abratio share" "$S/guests/guest/console.log"
echo
R="--session-dir $S --guest-root $IMG/root --system-map $IMG/System.map"
if "$OPVM" report --help >/dev/null 2>&1; then
	echo "== opvm report $R"
	# shellcheck disable=SC2086
	"$OPVM" report $R | head -n 20
	echo
	echo "== opvm report -l $R image:abratio"
	# shellcheck disable=SC2086
	"$OPVM" report -l $R image:abratio | head -n 12
else
	echo "== (opvm report is not in this build; the summary above is what was filed)"
	find "$S/guests" -name 'TIMER.*' | head -n 20
fi
