#!/bin/bash
# A Debian 12 disk guest, as users run them: mkdisk.sh OUT DEB
#
# debootstrap from Debian's archive (the mirror this host's apt uses, or
# $OPVM_DEBIAN_MIRROR), systemd as init, Debian's linux-image-amd64 with its
# headers, python3, nodejs, xz-utils, sqlite3 and linux-perf for real workloads and
# the in-guest cross-check (with OPVM_DISK_DBG=1 also libc6-dbg and
# python3.11-dbg), and opvm's guest package DEB installed with dpkg:
# DKMS builds opvm.ko for the image's kernel and the relay's unit is enabled.
# The disk is made with `mke2fs -d` (no loop mount); the kernel and initrd
# of its /boot are copied beside it for QEMU -kernel/-initrd.
#
# Writes OUT/disk.img (ext4, the whole disk is the root file system,
# /dev/vda), OUT/vmlinuz, OUT/initrd.img, OUT/kernel-release.
# Needs root (debootstrap, chroot), debootstrap and e2fsprogs.
set -euo pipefail
OUT=$1
DEB=$2
HERE=$(cd "$(dirname "$0")" && pwd)
SIZE=${OPVM_DISK_SIZE:-3G}
PKGS="systemd-sysv,udev,kmod,procps,python3,xz-utils,sqlite3,linux-perf"
PKGS="$PKGS,linux-image-amd64,linux-headers-amd64,dkms,gcc,make,libc6-dev"
# OPVM_DISK_DBG=1 (make images-disk DISK_DBG=1): the debug files of libc
# and of the release python3.11 as well, from the same suite, so their
# versions match the binaries (a guest that gives opvm full names through
# the relay with no host setup, docs/protocol.md FETCH)
[ "${OPVM_DISK_DBG:-}" = 1 ] && PKGS="$PKGS,libc6-dbg,python3.11-dbg"
# Debian's nodejs: a JIT runtime that writes /tmp/perf-PID.map
# (--perf-basic-prof), for the disk-guest-jit test (docs/runtimes.md); it
# and its libraries (libnode108, libicu72, libuv1...) add about 100 MB to
# the image's 1.2 GB
PKGS="$PKGS,nodejs"

[ "$(id -u)" = 0 ] || { echo "images-disk: needs root (debootstrap and chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null ||
	{ echo "images-disk: debootstrap is not installed (scripts/install-deps.sh)" >&2; exit 1; }

# The Debian mirror this host's apt is configured with (deb822 or one-line).
mirror() {
	local m
	if [ -n "${OPVM_DEBIAN_MIRROR:-}" ]; then
		echo "$OPVM_DEBIAN_MIRROR"
		return
	fi
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ && u !~ /security/ {print u; exit}')
	[ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '$1 == "deb" && $3 == "bookworm" {for (i = 2; i <= NF; i++) if ($i ~ /^(http|https|file):/) {print $i; exit}}')
	echo "${m:-http://deb.debian.org/debian}"
}

R=$OUT/root.tmp
# Never remove a tree with a file system still mounted in it (an earlier
# build killed while debootstrap or dpkg had /proc mounted there).
unmount_all() {
	local m
	[ -d "$R" ] || return 0
	for m in $(awk -v r="$(realpath "$R")/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
		umount -l "$m" || { echo "images-disk: cannot unmount $m" >&2; exit 1; }
	done
}
unmount_all
trap unmount_all EXIT
rm -rf "$R"
mkdir -p "$OUT/debs"
M=$(mirror)
echo "images-disk: debootstrap bookworm from $M"
t0=$(date +%s)
# The .debs are kept in OUT/debs: a rebuild downloads nothing again.
debootstrap --variant=minbase --include="$PKGS" --cache-dir="$(realpath "$OUT/debs")" \
	bookworm "$R" "$M" >"$OUT/debootstrap.log" 2>&1 ||
	{ tail -20 "$OUT/debootstrap.log"; echo "images-disk: debootstrap failed (log: $OUT/debootstrap.log)" >&2; exit 1; }
echo "images-disk: debootstrap took $(( $(date +%s) - t0 )) s"

KVER=$(ls "$R/lib/modules" | sort -V | tail -n 1)
[ -f "$R/boot/vmlinuz-$KVER" ] && [ -f "$R/boot/initrd.img-$KVER" ] ||
	{ echo "images-disk: no kernel/initrd for $KVER in the image's /boot" >&2; exit 1; }

# The guest's own configuration: root file system, serial console with a
# root shell (the tests drive the guest through it), workloads.
echo opvm-disk > "$R/etc/hostname"
echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" > "$R/etc/fstab"
chroot "$R" passwd -d root >/dev/null
install -d "$R/etc/systemd/system/serial-getty@ttyS0.service.d"
install -m 644 "$HERE/disk/autologin.conf" "$R/etc/systemd/system/serial-getty@ttyS0.service.d/"
install -m 644 "$HERE/disk/bashrc" "$R/root/.bashrc"
install -m 755 "$HERE/disk/opvm-wl" "$R/usr/local/bin/opvm-wl"
install -m 755 "$HERE/disk/perf-summary.py" "$R/usr/local/bin/opvm-perf-summary"
install -m 644 "$HERE/disk/queries.sql" "$R/usr/local/share/opvm-queries.sql"
install -m 644 "$HERE/disk/jit3.js" "$R/usr/local/share/opvm-jit3.js"
install -m 644 "$HERE/disk/opvm-workload.service" "$R/etc/systemd/system/"
chroot "$R" systemctl enable opvm-workload.service serial-getty@ttyS0.service >/dev/null 2>&1
# Nothing at boot that waits for a network the guest does not have.
chroot "$R" systemctl mask systemd-networkd-wait-online.service apt-daily.timer \
	apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true

# The guest package, as a user installs it: DKMS builds opvm.ko for the
# image's kernel, the package enables the relay's unit.
# DKMS reads /proc (best effort: without it the build still works).
# The package stays in the image (/var/cache/opvm-guest.deb): the tests
# purge and reinstall it.
cp "$DEB" "$R/var/cache/opvm-guest.deb"
t0=$(date +%s)
mount -t proc proc "$R/proc" 2>/dev/null || true
chroot "$R" dpkg -i /var/cache/opvm-guest.deb >"$OUT/dpkg.log" 2>&1 ||
	{ cat "$OUT/dpkg.log"; echo "images-disk: dpkg -i opvm-guest failed" >&2; exit 1; }
unmount_all
echo "images-disk: dpkg -i opvm-guest (DKMS build) took $(( $(date +%s) - t0 )) s"
ls "$R/lib/modules/$KVER/updates/dkms/"opvm.ko* >/dev/null 2>&1 ||
	{ cat "$OUT/dpkg.log"; echo "images-disk: DKMS built no opvm.ko for $KVER" >&2; exit 1; }
grep -q "updates/dkms/opvm.ko" "$R/lib/modules/$KVER/modules.dep" ||
	{ echo "images-disk: opvm.ko is not in $KVER's modules.dep" >&2; exit 1; }
[ -L "$R/etc/systemd/system/multi-user.target.wants/opvm-relay.service" ] ||
	{ echo "images-disk: the package did not enable opvm-relay.service" >&2; exit 1; }

chroot "$R" apt-get clean
cp "$R/boot/vmlinuz-$KVER" "$OUT/vmlinuz.tmp"
cp "$R/boot/initrd.img-$KVER" "$OUT/initrd.img.tmp"
rm -f "$OUT/disk.img.tmp"
mke2fs -q -t ext4 -L opvm-root -d "$R" "$OUT/disk.img.tmp" "$SIZE"
rm -rf "$R"
mv "$OUT/vmlinuz.tmp" "$OUT/vmlinuz"
mv "$OUT/initrd.img.tmp" "$OUT/initrd.img"
echo "$KVER" > "$OUT/kernel-release"
mv "$OUT/disk.img.tmp" "$OUT/disk.img"
echo "images-disk: $OUT/disk.img ($(du -h "$OUT/disk.img" | cut -f1) used, kernel $KVER)"
