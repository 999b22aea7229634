# Shared by tests/integration/disk-guest-*.sh and tests/bench/disk-guest-bench.sh
# (sourced after qemu-common.bash): the Debian disk guest `make images-disk`
# builds (images/mkdisk.sh), driven through its serial console's root shell
# (tests/integration/guest-console.py).
# OPVM_TEST_DISK=DIR: a disk guest already built there (disk.img, vmlinuz,
# initrd.img), used as it is.
DISK=${OPVM_TEST_DISK:-$BUILD/images-disk}
CONSOLE_PY=$(dirname "${BASH_SOURCE[0]}")/guest-console.py

# need_disk: qemu, root (debootstrap), and the image, built or cached.
need_disk() {
	command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed (scripts/install-deps.sh)"
	command -v python3 >/dev/null 2>&1 || skip "python3 is not installed (scripts/install-deps.sh)"
	[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
	local t0 before
	if [ -n "${OPVM_TEST_DISK:-}" ]; then
		[ -f "$DISK/disk.img" ] || fail "OPVM_TEST_DISK=$DISK holds no disk.img"
		return 0
	fi
	before=$(stat -c %Y "$DISK/disk.img" 2>/dev/null)
	# Building it (debootstrap, a kernel, DKMS) and booting systemd under
	# TCG take many minutes: `make check` runs these tests only where the
	# disk guest is built already or OPVM_DISK_TESTS=1 asks for them
	# (`make check-disk` does both).
	if [ -z "$before" ] && [ "${OPVM_DISK_TESTS:-0}" != 1 ]; then
		skip "the Debian disk guest is not built: run make check-disk (builds it with make images-disk, then runs the disk-guest tests)"
	fi
	if [ -z "$before" ]; then
		[ "$(id -u)" = 0 ] || skip "building the disk guest needs root (debootstrap, chroot)"
		command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed (scripts/install-deps.sh)"
	fi
	t0=$(date +%s)
	mkdir -p "$BUILD"
	# Cached: make rebuilds it only when its inputs changed.
	make -s images-disk BUILD="$BUILD" > "$BUILD/images-disk.log" 2>&1 ||
		{ tail -30 "$BUILD/images-disk.log"; fail "make images-disk failed (log: $BUILD/images-disk.log)"; }
	[ "$(stat -c %Y "$DISK/disk.img" 2>/dev/null)" = "$before" ] ||
		echo "MEASURED make images-disk: $(( $(date +%s) - t0 )) s (built)"
	[ -f "$DISK/disk.img" ] && [ -f "$DISK/vmlinuz" ] && [ -f "$DISK/initrd.img" ] ||
		fail "make images-disk left no disk.img/vmlinuz/initrd.img in $DISK"
}

# gsh TIMEOUT CMD...: runs CMD in the guest's root shell on $CON (its
# serial console's socket); prints its output, returns its status.
gsh() {
	python3 "$CONSOLE_PY" "$CON" run "$@"
}

# wait_shell TIMEOUT: until the guest's shell answers on $CON.
wait_shell() {
	python3 "$CONSOLE_PY" "$CON" wait "$1"
}

# The kernel command line of the disk guest (the TSC as clock: see
# make_cmdline in vmm/qemu/qemu-launch.c).
DISK_CMDLINE="root=/dev/vda rw console=ttyS0 quiet tsc=reliable clocksource=tsc"
