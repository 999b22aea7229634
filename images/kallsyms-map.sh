#!/bin/bash
# Make BUILD/System.map for the guest kernel: kallsyms-map.sh BUILD
#
# Debian's /boot/System.map-<ver> is a placeholder ("The real System.map is
# in the linux-image-<version>-dbg package").  The running kernel knows its
# symbols, so the test image is booted once with nokaslr and the image's
# init copies /proc/kallsyms to a virtio port backed by a file.  Without
# KASLR, run-time addresses are the link-time ones: the result is a
# System.map.  Module symbols ("[mod]") are dropped.
set -euo pipefail
B=$1
out=$B/System.map
raw=$B/kallsyms.raw
rm -f "$raw"
for m in /boot/System.map-"$(basename "$(readlink -f "$B/vmlinuz")" | sed 's/^vmlinuz-//')"; do
	# A real System.map (from a -dbg package or a self-built kernel) wins.
	if [ -f "$m" ] && [ "$(wc -l < "$m")" -gt 1000 ]; then
		cp "$m" "$out"
		exit 0
	fi
done
timeout 120 qemu-system-x86_64 -accel tcg -m 512 -smp 1 -nographic -no-reboot \
	-kernel "$B/vmlinuz" -initrd "$B/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet nokaslr opvm.workload=kallsyms" \
	-device virtio-serial-pci \
	-chardev file,id=ks,path="$raw" \
	-device virtserialport,chardev=ks,name=org.opvm.kallsyms \
	> "$B/kallsyms-boot.log" 2>&1 || true
if ! [ -s "$raw" ] || ! grep -q ' T _text$\| T _stext$' "$raw"; then
	echo "images: could not read the guest's kallsyms (see $B/kallsyms-boot.log)" >&2
	exit 1
fi
grep -v '\[' "$raw" | sort -s -k1,1 > "$out.tmp"
mv "$out.tmp" "$out"
rm -f "$raw"
