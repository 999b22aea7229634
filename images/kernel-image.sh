#!/bin/bash
# The test image with another Debian release's kernel, for introspection's
# tests on the kernels users run (make check-kernels):
#
#   kernel-image.sh IMAGES SUITE OUT
#
# IMAGES is the test image `make images` built (its root: workloads, init,
# busybox, glibc); SUITE a Debian suite (bullseye: Linux 5.10, trixie:
# 6.12).  Downloads that suite's linux-image-amd64 kernel with apt-get and
# a private sources list and state under OUT (the host's apt configuration
# is not touched), and writes OUT/<kver>/: vmlinuz, root/ (the image's
# root with that kernel's virtio modules instead of the image's, so
# org.opvm ports still appear; no opvm.ko: boot it with opvm.kmod=0),
# initramfs.cpio.gz and System.map (kallsyms-map.sh: one boot with
# nokaslr).  Prints the directory.  Cached: a second run with the same
# kernel and test image does nothing.  $OPVM_DEBIAN_MIRROR picks the mirror.  Exits 2
# when the kernel cannot be had (no network, no such suite on the mirror),
# 1 on other errors.
set -euo pipefail
IMG=$1
SUITE=$2
OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_mmio virtio_console"

[ -d "$IMG/root" ] || { echo "kernel-image: no $IMG/root: run make images" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)		# apt takes relative paths from its own dirs
A=$OUT/apt-$SUITE
# shellcheck source=images/apt-suite.bash
. "$HERE/apt-suite.bash"
apt_suite "$A" "$SUITE" ||
	{ echo "kernel-image: apt-get update for $SUITE failed (network? $MIRROR)" >&2; exit 2; }
PKG=$(apt-cache "${APT[@]}" depends linux-image-amd64 2>/dev/null |
	awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true)
PKG=${PKG%:amd64}
[ -n "$PKG" ] || { echo "kernel-image: no linux-image-amd64 in $SUITE on $MIRROR" >&2; exit 2; }
KVER=${PKG#linux-image-}
K=$OUT/$KVER
# the root again when the test image changed, the map only for a new kernel
if [ -f "$K/System.map" ] && [ "$K/initramfs.cpio.gz" -nt "$IMG/initramfs.cpio.gz" ]; then
	echo "$K"
	exit 0
fi
mkdir -p "$K"
(cd "$A/cache/archives" && ls "$PKG"_*.deb >/dev/null 2>&1 ||
	apt-get "${APT[@]}" -qq download "$PKG" >&2) ||
	{ echo "kernel-image: cannot download $PKG from $MIRROR" >&2; exit 2; }
X=$K/deb
rm -rf "$X"
dpkg-deb -x "$(ls "$A/cache/archives/$PKG"_*.deb | head -1)" "$X"
cp "$X/boot/vmlinuz-$KVER" "$K/vmlinuz"

# the image's root, its modules swapped for this kernel's
R=$K/root.new
rm -rf "$R" "$K/root"
cp -a "$IMG/root" "$R"
rm -rf "$R"/lib/modules/*
: > "$R/etc/opvm/modules"
: > "$R/etc/opvm/extra-modules"
MD=$X/lib/modules/$KVER
[ -d "$MD" ] || MD=$X/usr/lib/modules/$KVER	# merged /usr (trixie)
for m in $MODULES; do
	p=$(find "$MD" -name "$m.ko*" 2>/dev/null | head -1)
	[ -n "$p" ] || continue		# built in, or not in this kernel
	rel=/lib/modules/$KVER/${p#"$MD"/}
	rel=${rel%.xz}
	rel=${rel%.zst}
	mkdir -p "$R$(dirname "$rel")"
	case "$p" in
	*.xz) xz -dc "$p" > "$R$rel" ;;
	*.zst) zstd -qdc "$p" > "$R$rel" ;;
	*) cp "$p" "$R$rel" ;;
	esac
	echo "$rel" >> "$R/etc/opvm/modules"
done
mv "$R" "$K/root"
rm -rf "$X"
(cd "$K/root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) > "$K/initramfs.cpio.gz"
[ -f "$K/System.map" ] || "$HERE/kallsyms-map.sh" "$K" >&2
echo "$K"
