# Shared by tests/integration/libvirt-*.sh (sourced after qemu-common.bash):
# a real libvirtd on qemu:///system.
#
# start_libvirt: skips without root or libvirt; starts virtlogd and libvirtd
# if none answers (pidfiles in $T, stopped again by pid at exit through
# stop_libvirt, which the test's CLEANUP_HOOK calls); creates the
# libvirt-qemu user the QEMU driver needs if it is missing (and puts it in
# group kvm, or libvirtd re-probes QEMU at every domain start).
URI=qemu:///system

# mk_tmp_libvirt NAME: mk_tmp, but where libvirt's QEMU user can reach the
# files a domain is given (kernel, initrd, disk, console): under /var/tmp
# when the checkout's own path is not open to other users (a clone in a
# 0700 directory made `virsh create` fail with "Permission denied").
mk_tmp_libvirt() {
	local d
	d=$(realpath "$BUILD")
	while [ "$d" != / ] && [ -x "$d" ] && case "$(stat -c %A "$d" | cut -c10)" in x|t) true ;; *) false ;; esac; do
		d=$(dirname "$d")
	done
	if [ "$d" = / ]; then
		mk_tmp "$1"
		return
	fi
	mkdir -p /var/tmp/opvm-tests && chmod 755 /var/tmp/opvm-tests
	T=$(mktemp -d "/var/tmp/opvm-tests/$1.XXXXXX")
	trap cleanup EXIT
}
VIRSH="virsh -q -c $URI"
STARTED_DAEMONS=""

stop_libvirt() {
	for p in $STARTED_DAEMONS; do
		kill "$p" 2>/dev/null
	done
}

start_libvirt() {
	[ "$(id -u)" = 0 ] || skip "needs root (libvirtd, qemu:///system)"
	command -v libvirtd >/dev/null 2>&1 && command -v virsh >/dev/null 2>&1 ||
		skip "libvirt is not installed (scripts/install-deps.sh)"
	if ! $VIRSH version >/dev/null 2>&1; then
		getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
		id libvirt-qemu >/dev/null 2>&1 ||
			useradd -r -g libvirt-qemu -d /var/lib/libvirt -s /usr/sbin/nologin libvirt-qemu
		# libvirtd re-probes QEMU (about 50 s here) at every domain start when
		# its QEMU user cannot open /dev/kvm that the probe could use.
		if [ -e /dev/kvm ] && getent group kvm >/dev/null &&
			! id -nG libvirt-qemu | grep -qw kvm; then
			usermod -aG kvm libvirt-qemu
		fi
		mkdir -p /var/log/libvirt /var/lib/libvirt /var/cache/libvirt /run/libvirt
		# The daemons chdir("/") before writing their pidfiles: give absolute paths.
		local piddir
		piddir=$(realpath "$T")
		if ! [ -S /run/libvirt/virtlogd-sock ]; then
			virtlogd -d -p "$piddir/virtlogd.pid" || fail "cannot start virtlogd"
			sleep 0.5
			STARTED_DAEMONS="$STARTED_DAEMONS $(cat "$piddir/virtlogd.pid")"
		fi
		libvirtd -d -p "$piddir/libvirtd.pid" || fail "cannot start libvirtd"
		for _ in $(seq 50); do
			$VIRSH version >/dev/null 2>&1 && break
			sleep 0.2
		done
		STARTED_DAEMONS="$(cat "$piddir/libvirtd.pid") $STARTED_DAEMONS"
		$VIRSH version >/dev/null 2>&1 || fail "libvirtd does not answer on $URI"
	fi
	echo "libvirt: $($VIRSH version | head -1)"
}
