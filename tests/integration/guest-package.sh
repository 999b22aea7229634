#!/bin/bash
# opvm.ko as users install it in their own guests: the DKMS tree builds the
# module for every Debian 12 kernel flavour whose headers are installed here
# (at least amd64 and cloud-amd64, the stated range), and `make guest-deb`
# makes a package holding the DKMS sources, the relay, its systemd unit and
# a modules-load entry, with scripts that register the module with DKMS.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
command -v dkms >/dev/null || { echo "SKIP: dkms is not installed (scripts/install-deps.sh)"; exit 77; }
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is not installed"; exit 77; }

T=$(mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/guest-package.XXXXXX")
T=$(cd "$T" && pwd)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
VERSION=$(cat VERSION)

make -s -C guest-kmod OUT="$T/kmod" deb >"$T/deb.log" 2>&1 || { cat "$T/deb.log"; fail "make guest-deb"; }
DEB=$T/kmod/opvm-guest_${VERSION}_amd64.deb

# DKMS, in a private tree (nothing registered on this host), per flavour.
built=0
for flavour in amd64 cloud-amd64; do
	kdir=$(ls -d /usr/src/linux-headers-* 2>/dev/null |
		grep -E "^/usr/src/linux-headers-[0-9.]+-[0-9]+-$flavour\$" | sort -V | tail -n 1)
	[ -n "$kdir" ] || fail "no $flavour headers: install linux-headers-$flavour (scripts/install-deps.sh)"
	kver=${kdir#/usr/src/linux-headers-}
	mkdir -p "$T/tree"
	if ! dkms build -m opvm -v "$VERSION" -k "$kver" --kernelsourcedir "$kdir" \
		--dkmstree "$T/tree" --sourcetree "$T/kmod/dkms" >"$T/dkms-$flavour.log" 2>&1; then
		tail -30 "$T/dkms-$flavour.log"
		fail "dkms build against $kver"
	fi
	ko=$(find "$T/tree/opvm/$VERSION/$kver" -name 'opvm.ko*' | head -n 1)
	[ -n "$ko" ] || fail "dkms built no opvm.ko for $kver"
	vm=$(modinfo -F vermagic "$ko" | cut -d' ' -f1)
	[ "$vm" = "$kver" ] || fail "opvm.ko for $kver has vermagic '$vm'"
	echo "RESULT dkms build: opvm.ko for $kver ($(stat -c %s "$ko") bytes)"
	built=$((built + 1))
done
[ "$built" -ge 2 ] || fail "built for $built flavours"

# The package: what it holds, and scripts that use DKMS and the unit.
dpkg-deb -c "$DEB" | awk '{print $6}' >"$T/contents"
for f in ./usr/src/opvm-$VERSION/dkms.conf ./usr/src/opvm-$VERSION/Kbuild \
	./usr/src/opvm-$VERSION/opvm_proto.h ./usr/sbin/opvm-relay \
	./lib/systemd/system/opvm-relay.service ./usr/lib/modules-load.d/opvm.conf; do
	grep -qxF "$f" "$T/contents" || fail "package lacks $f"
done
# Every module source Kbuild names travels in the DKMS tree.
for o in $(sed -n 's/^opvm-y := //p' guest-kmod/Kbuild); do
	grep -qxF "./usr/src/opvm-$VERSION/${o%.o}.c" "$T/contents" || fail "package lacks ${o%.o}.c"
done
dpkg-deb -f "$DEB" Package Version Depends | tr '\n' ' ' >"$T/fields"
grep -q "Package: opvm-guest" "$T/fields" && grep -q "Version: $VERSION" "$T/fields" &&
	grep -q dkms "$T/fields" || fail "control fields: $(cat "$T/fields")"
dpkg-deb -e "$DEB" "$T/ctl"
grep -q "dkms install -m opvm -v $VERSION" "$T/ctl/postinst" || fail "postinst does not install through dkms"
file "$T/kmod/opvm-relay" | grep -q 'statically linked' || fail "relay is not static"
if command -v systemd-analyze >/dev/null; then
	# The unit parses and names the packaged relay; verify checks that
	# ExecStart exists on this host, so a copy points it at /bin/true.
	grep -qx 'ExecStart=/usr/sbin/opvm-relay' guest-kmod/pkg/opvm-relay.service || fail "unit's ExecStart"
	mkdir -p "$T/unit"
	sed 's#^ExecStart=/usr/sbin/opvm-relay#ExecStart=/bin/true#' \
		guest-kmod/pkg/opvm-relay.service >"$T/unit/opvm-relay.service"
	systemd-analyze verify --man=no "$T/unit/opvm-relay.service" >"$T/verify.log" 2>&1 ||
		{ cat "$T/verify.log"; fail "systemd-analyze verify"; }
fi
echo "RESULT guest package: $(basename "$DEB"), $(wc -l <"$T/contents") entries"
