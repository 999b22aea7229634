#!/bin/sh
# Install the Debian 12 packages opvm needs to build, test and run its demo.
# Usage: scripts/install-deps.sh   (idempotent; safe to re-run)
# As root it installs directly; as another user it re-runs itself through
# sudo (a fresh Debian 12 root shell has no sudo binary, so it is not required).
set -e
PKGS="build-essential pkg-config clang libclang-rt-14-dev
libelf-dev libdw-dev libdebuginfod-dev libcapstone-dev libcmocka-dev
libjansson-dev libvirt-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static kmod cpio
libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients golang-go
python3 chromium acpica-tools dkms linux-headers-cloud-amd64 help2man man-db
debootstrap qemu-utils e2fsprogs
libncurses-dev libmicrohttpd-dev prometheus tmux universal-ctags libbpf-dev curl
linux-perf strace
liblzma-dev debuginfod libarchive-tools"
missing=""
for p in $PKGS; do
	dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo "$0" "$@"
	fi
	echo "install-deps: installing needs root and there is no sudo here: run 'su -c $0' or log in as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
