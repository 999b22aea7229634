#!/bin/bash
# `opvm run --disk` against hostile images, with TMPDIR (where opvm copies
# the image's kernel and initrd) a 64 MiB tmpfs, and ext4 images built by
# mke2fs -d (no loop mount, no root needed for the images themselves):
#  - sparse: /boot/vmlinuz-9.9 a 50 GB sparse file (and its initrd) in a
#    64 MiB image: refused in one message naming the file's size and the
#    limit (--disk-boot-max, 256 MiB), and nothing created in TMPDIR: no
#    process of the run opens a file there for writing (strace -f), the
#    tmpfs is empty after.  Before, debugfs dumped it as zeros until ENOSPC.
#  - fifo: --disk naming a FIFO is refused in one message, at once (before,
#    open() blocked until a writer came: the run is stopped after 60 s).
#  - fallback: 9.9 the sparse kernel, 9.8 without its initrd, 9.7 the test
#    image's kernel and initramfs: both skipped with a note each saying why
#    and that 9.7 boots, and the guest runs its workload to power-off from
#    9.7 (its console shows the workload's end).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ "$(id -u)" = 0 ] || skip "needs root, to mount a small tmpfs as TMPDIR"
command -v mke2fs >/dev/null 2>&1 && command -v debugfs >/dev/null 2>&1 ||
	skip "mke2fs and debugfs are not installed (e2fsprogs)"
command -v strace >/dev/null 2>&1 || skip "strace is not installed"
mke2fs -V 2>&1 | grep -q . || skip "mke2fs does not run"
mk_tmp disk-boot-hostile
TMPFS=$T/tmpfs
mkdir -m 0700 "$TMPFS"
mount -t tmpfs -o size=64m,mode=0700 tmpfs "$TMPFS" || skip "cannot mount a tmpfs"
CLEANUP_HOOK=unmount_tmpfs
unmount_tmpfs() { umount -l "$TMPFS" 2>/dev/null; }

# image NAME: $T/NAME.img, 64 MiB ext4 from the tree $T/NAME
image() {
	mke2fs -q -F -t ext4 -d "$T/$1" "$T/$1.img" 64M > "$T/$1.mke2fs" 2>&1 ||
		{ cat "$T/$1.mke2fs"; fail "mke2fs -d $T/$1"; }
}
# one_message NAME: stderr of case NAME holds one message (log_err wraps)
one_message() {
	local n
	n=$(grep -vc '^  ' "$T/$1.err")
	[ "$n" = 1 ] || fail "$1: $n messages on stderr, not one"
}

# sparse
mkdir -p "$T/sparse/boot"
truncate -s 50G "$T/sparse/boot/vmlinuz-9.9"
echo initrd > "$T/sparse/boot/initrd.img-9.9"
image sparse
# LeakSanitizer cannot run under ptrace (make check SAN=address): not here
TMPDIR=$TMPFS ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
	timeout 600 strace -f -qq -e trace=open,openat,creat -o "$T/sparse.trace" \
	"$OPVM" run --disk "$T/sparse.img" -d "$T/s-sparse" > "$T/sparse.out" 2> "$T/sparse.err"
rc=$?
cat "$T/sparse.err"
[ $rc != 0 ] || fail "sparse: opvm run --disk booted a 50 GB kernel"
one_message sparse
tr -s '\n ' '  ' < "$T/sparse.err" | grep -q "vmlinuz-9.9 is 53687091200 bytes, above the 256 MiB limit" ||
	fail "sparse: the message does not name the kernel's size and the limit"
if grep -F "$TMPFS/" "$T/sparse.trace" | grep -E 'O_WRONLY|O_RDWR|O_CREAT|creat\('; then
	fail "sparse: a file was opened for writing in TMPDIR (above)"
fi
[ -z "$(ls -A "$TMPFS")" ] || fail "sparse: TMPDIR holds $(ls -A "$TMPFS"); $(df -h "$TMPFS" | tail -1)"
echo "checked: sparse refused, no file opened for writing in TMPDIR ($(df -k --output=used "$TMPFS" | tail -1 | tr -d ' ') KiB used)"

# fifo
mkfifo "$T/fifo"
TMPDIR=$TMPFS timeout 60 "$OPVM" run --disk "$T/fifo" -d "$T/s-fifo" > "$T/fifo.out" 2> "$T/fifo.err"
rc=$?
cat "$T/fifo.err"
[ $rc != 124 ] || fail "fifo: opvm run --disk FIFO hung (stopped after 60 s)"
[ $rc != 0 ] || fail "fifo: opvm run --disk FIFO succeeded"
one_message fifo
tr -s "\n " "  " < "$T/fifo.err" | grep -q "is a FIFO, not a disk image file" || fail "fifo: the message does not say it is a FIFO"
[ -z "$(ls -A "$TMPFS")" ] || fail "fifo: TMPDIR holds $(ls -A "$TMPFS")"
echo "checked: fifo refused at once"

# fallback
mkdir -p "$T/fb/boot"
truncate -s 50G "$T/fb/boot/vmlinuz-9.9"
echo initrd > "$T/fb/boot/initrd.img-9.9"
cp "$IMG/vmlinuz" "$T/fb/boot/vmlinuz-9.8"
cp "$IMG/vmlinuz" "$T/fb/boot/vmlinuz-9.7"
cp "$IMG/initramfs.cpio.gz" "$T/fb/boot/initrd.img-9.7"
image fb
TMPDIR=$TMPFS timeout 600 "$OPVM" run --disk "$T/fb.img" --workload syscalls:1 -F 50 \
	-d "$T/s-fb" > "$T/fb.out" 2> "$T/fb.err"
rc=$?
cat "$T/fb.err"
[ $rc = 0 ] || { cat "$T/fb.out"; fail "fallback: opvm run --disk exits $rc"; }
msg=$(tr -s '\n ' '  ' < "$T/fb.err")
echo "$msg" | grep -q "kernel 9.9 skipped (/boot/vmlinuz-9.9 is 53687091200 bytes, above the 256 MiB limit (--disk-boot-max)); booting 9.7" ||
	fail "fallback: no note that 9.9 is skipped for its size and 9.7 boots"
echo "$msg" | grep -q "kernel 9.8 skipped (/boot/initrd.img-9.8 is missing); booting 9.7" ||
	fail "fallback: no note that 9.8 is skipped for its missing initrd"
grep -aq "OPVM-TRUTH" "$T/s-fb/guests/guest/console.log" ||
	{ tail -20 "$T/s-fb/guests/guest/console.log"; fail "fallback: the test image's workload did not run"; }
[ -z "$(find "$TMPFS" -type f)" ] || fail "fallback: TMPDIR holds $(find "$TMPFS" -type f) after the run"
echo "checked: fallback booted 9.7, 9.9 and 9.8 skipped with their reasons"

echo "RESULT disk-boot-hostile: sparse 50 GB kernel refused with nothing written to TMPDIR, FIFO image refused, broken newest releases skipped for the complete 9.7"
exit 0
