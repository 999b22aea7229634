#!/bin/bash
# Assemble the guest root directory: mkroot.sh BUILD KVER
# Reads binaries already built under BUILD (kmod/, bin/) and the host's
# Debian packages (busybox-static, linux-image, libc6); writes BUILD/root.
set -euo pipefail
B=$1
KVER=$2
HERE=$(cd "$(dirname "$0")" && pwd)
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_mmio virtio_console"
# Small dependency-free modules the tests load and unload after opvm.ko.
EXTRA_MODULES="crc7 crc8"
# Modules the kmodhash workload loads itself, in load order (CPU time in a
# module's text without opvm.ko: tests/integration/introspect-kmods.sh).
WORK_MODULES="af_alg algif_hash wp512"
R=$B/root.new
rm -rf "$R"
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,etc/opvm,lib64} \
	"$R"/lib/x86_64-linux-gnu "$R/lib/modules/$KVER/extra"

cp /bin/busybox "$R/bin/busybox"
for a in $(/bin/busybox --list-full); do
	[ -e "$R/$a" ] || ln -s /bin/busybox "$R/$a"
done
install -m 755 "$HERE/init" "$R/init"

# Kernel modules the channel needs, in load order (etc/opvm/modules), the
# extra ones (etc/opvm/extra-modules) and the workloads' (etc/opvm/
# work-modules); built-in ones are skipped.
: > "$R/etc/opvm/modules"
: > "$R/etc/opvm/extra-modules"
: > "$R/etc/opvm/work-modules"
for m in $MODULES $EXTRA_MODULES $WORK_MODULES; do
	list=modules
	case " $EXTRA_MODULES " in *" $m "*) list=extra-modules ;; esac
	case " $WORK_MODULES " in *" $m "*) list=work-modules ;; esac
	p=$(modinfo -k "$KVER" -n "$m" 2>/dev/null || true)
	case "$p" in
	""|"(builtin)"|*builtin*) continue ;;
	esac
	rel=${p#/lib/modules/$KVER/}
	dst="$R/lib/modules/$KVER/${rel%.xz}"
	dst=${dst%.zst}
	mkdir -p "$(dirname "$dst")"
	case "$p" in
	*.xz) xz -dc "$p" > "$dst" ;;
	*.zst) zstd -qdc "$p" > "$dst" ;;
	*) cp "$p" "$dst" ;;
	esac
	echo "/lib/modules/$KVER/${rel%.xz}" | sed 's/\.zst$//' >> "$R/etc/opvm/$list"
done
cp "$B/kmod/opvm.ko" "$R/lib/modules/$KVER/extra/opvm.ko"
cp "$B/kmod/opvm-relay" "$R/sbin/opvm-relay"

# Workloads, and the shared libraries the dynamic ones need (host glibc).
for f in "$B"/bin/*; do
	cp "$f" "$R/usr/bin/"
	{ ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3} /^\t\/lib/{print $1}' |
	while read -r lib; do
		real=$(readlink -f "$lib")
		base=$(basename "$lib")
		[ -e "$R/lib/x86_64-linux-gnu/$base" ] ||
			cp "$real" "$R/lib/x86_64-linux-gnu/$base"
	done
done
cp -L /lib/x86_64-linux-gnu/libc.so.6 "$R/lib/x86_64-linux-gnu/libc.so.6"
cp -L /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \
	"$R/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
ln -sf /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$R/lib64/ld-linux-x86-64.so.2"
echo "root:x:0:0:root:/:/bin/sh" > "$R/etc/passwd"

rm -rf "$B/root"
mv "$R" "$B/root"
