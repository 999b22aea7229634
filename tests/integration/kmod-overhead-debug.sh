#!/bin/bash
# What sending a debug file costs the guest: tests/bench/guest-module-overhead.sh
# (QEMU -icount: guest instructions, not the host's speed) with the test
# image's initramfs plus libc6-dbg's debug file of its libc at
# /usr/lib/debug/.build-id/xx/yyyy.debug (as fetch-debug-file.sh makes it),
# libcmix run first for 1 s of guest time (BENCH_PRE) so libc has samples, and `opvm attach`
# at the host end with an empty cache and the host's /usr/lib/debug hidden
# (a mount namespace): the host asks the relay for libc's debug file (4 MB)
# and the relay sends it, paced by its CPU bucket, while the measured
# workloads run.  Asserts:
#  - the relay sent the debug file (kmod-relay-files-attached bytes >= its
#    size; the relay's exit line counts CPU time for debug files);
#  - the attached figures stay within the module's bounds, the
#    targets of make bench: switch <= 2 % (it measures 1.49-1.59 %),
#    cpu <= 0.5 %, its target; fork <= 5 %, its target).  The relay's share
#    of opvm's samples (kmod-relay-share, host timer ticks: wall clock) is
#    printed, not asserted.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
command -v cpio >/dev/null || skip "cpio is not installed"
mk_tmp kmod-overhead-debug
T=$(cd "$T" && pwd)

libc=$IMG/root/lib/x86_64-linux-gnu/libc.so.6
lbid=$(readelf -n "$libc" | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p')
[ -n "$lbid" ] || fail "no build-id in $libc"
rel=usr/lib/debug/.build-id/${lbid:0:2}/${lbid:2}.debug
# the image's libc is the host's: libc6-dbg of the host's libc6 version
ver=$(dpkg-query -W -f '${Version}' libc6) || skip "cannot tell the host's libc6 version"
DEBS=$BUILD/debuginfod-debs
mkdir -p "$DEBS"
ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb >/dev/null 2>&1 ||
	(cd "$DEBS" && apt-get download "libc6-dbg=$ver" > "$T/apt.log" 2>&1) ||
	skip "apt cannot download libc6-dbg=$ver"
dpkg-deb -x "$(ls "$DEBS"/libc6-dbg_"${ver//:/%3a}"_*.deb | head -1)" "$T/deb"
dbg=$T/deb/$rel
[ -f "$dbg" ] || skip "libc6-dbg has no debug file for this libc ($lbid)"
dsize=$(stat -c %s "$dbg")
mkdir -p "$T/extra/$(dirname "$rel")"
cp "$dbg" "$T/extra/$rel"
cp "$IMG/initramfs.cpio.gz" "$T/initrd"
(cd "$T/extra" && find usr | cpio -o -H newc --quiet | gzip -1) >> "$T/initrd" ||
	fail "cannot append to the initramfs"

# the bench's own figures, with the host's debug files hidden and an
# empty build-id cache (so the guest sends libc and then its debug file)
DEBUGINFOD_URLS= XDG_CACHE_HOME=$T/cache BENCH_INITRD=$T/initrd BENCH_PRE=libcmix:1+ BENCH_BOOT_SECS=400 \
	unshare -m sh -c 'mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
	bash tests/bench/guest-module-overhead.sh > "$T/bench.out" 2>&1
rc=$?
sed 's/^/MEASURED /' "$T/bench.out"
[ $rc = 77 ] && skip "$(grep -m1 SKIP "$T/bench.out")"
[ $rc = 0 ] || fail "guest-module-overhead failed (rc $rc, output above)"

at_most() {	# at_most NAME BOUND WHY
	local v
	v=$(sed -n "s/^$1: \(-\{0,1\}[0-9.]*\) .*/\1/p" "$T/bench.out")
	[ -n "$v" ] || fail "no $1 figure (output above)"
	awk -v v="$v" -v m="$2" 'BEGIN { exit !(v + 0 <= m + 0) }' ||
		fail "$1: $v, over $2 while the relay sent a $dsize-byte debug file: $3"
	echo "RESULT $1: $v <= $2 (a $dsize-byte debug file sent)"
}
sent=$(sed -n 's/^kmod-relay-files-attached: [0-9]* files, \([0-9]*\) bytes$/\1/p' "$T/bench.out")
[ -n "$sent" ] && [ "$sent" -ge "$dsize" ] ||
	fail "the relay sent ${sent:-no} bytes, less than libc's $dsize-byte debug file (output above)"
echo "RESULT relay sent $sent bytes to opvm attach (libc's debug file: $dsize)"
at_most kmod-overhead-switch-attached 2 "its target"
at_most kmod-overhead-cpu-attached 0.5 "its target"
at_most kmod-overhead-fork-attached 5 "its target"
# the relay's share of opvm's samples is a share of host timer ticks (wall
# clock, not guest instructions): printed above, not asserted here
grep -q "^kmod-relay-debug-cpu-attached: " "$T/bench.out" ||
	fail "the relay's exit line counts no CPU time for debug files (output above)"
echo "RESULT $(grep "^kmod-relay-debug-cpu-attached: " "$T/bench.out") of CPU for the debug file" \
	"(the relay's exit line)"
echo PASS
