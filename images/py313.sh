#!/bin/bash
# A CPython 3.13 for the test guest: py313.sh BUILD
# Debian 13's python3.13-minimal and what it needs to run (its own libc6,
# libexpat1, zlib1g, libgcc-s1), as .debs from Debian's archive (suite
# trixie, through a private apt directory: apt-suite.bash), unpacked
# with dpkg -x into /opt/py313, and tests' wrapper scripts (images/py313/)
# into /usr/bin: BUILD/py313.cpio.gz, an
# initramfs piece that a test appends to initramfs.cpio.gz (the kernel
# unpacks concatenated archives in turn), so no other test boots its size.
# The .debs are kept in BUILD/py313-debs; without them and without the
# network, BUILD/py313.missing says why and the tests that need the piece
# skip.  Output in BUILD: py313.cpio.gz, py313-root/, py313.versions.
set -euo pipefail
mkdir -p "$1"
B=$(cd "$1" && pwd)		# apt takes relative paths from its own dirs
HERE=$(cd "$(dirname "$0")" && pwd)
PKGS="python3.13-minimal libpython3.13-minimal libc6 libexpat1 zlib1g libgcc-s1"
D=$B/py313-debs
A=$B/py313-apt
rm -f "$B/py313.missing"
missing() {
	echo "$*" > "$B/py313.missing"
	echo "images: no CPython 3.13 piece: $* (the Python 3.13 tests will skip)" >&2
	exit 0
}

mkdir -p "$D"
have=1
for p in $PKGS; do
	ls "$D/${p}_"*.deb > /dev/null 2>&1 || have=0
done
if [ "$have" = 0 ]; then
	command -v apt-get > /dev/null || missing "apt-get is not installed"
	# shellcheck source=images/apt-suite.bash
	. "$HERE/apt-suite.bash"
	apt_suite "$A" trixie 2> "$A.log" ||
		missing "apt-get update of Debian 13 (trixie) failed (network? $MIRROR; $A.log)"
	rm -f "$D"/*.deb
	# shellcheck disable=SC2086
	(cd "$D" && apt-get "${APT[@]}" -qq download $PKGS) 2> "$A.log" ||
		missing "apt-get download of $PKGS failed (network? $MIRROR; $A.log)"
fi

R=$B/py313-root.new
rm -rf "$R"
mkdir -p "$R/opt/py313/tmp" "$R/usr/bin"
: > "$B/py313.versions.new"
for f in "$D"/*.deb; do
	dpkg -x "$f" "$R/opt/py313"
	# shellcheck disable=SC2016 # dpkg-deb's fields, not the shell's
	dpkg-deb --showformat='${Package} ${Version}\n' -W "$f" >> "$B/py313.versions.new"
done
P=$R/opt/py313
# merged /usr, as base-files would make it
ln -s usr/bin "$P/bin"
ln -s usr/lib "$P/lib"
ln -s usr/lib64 "$P/lib64"
# what python3.13 does not need to start: documentation, charset modules
rm -rf "${P:?}/usr/share" "$P/usr/lib/x86_64-linux-gnu/gconv" "$P/usr/lib/binfmt.d"
[ -x "$P/usr/bin/python3.13" ] || missing "python3.13 is not in the unpacked packages"
install -m 755 "$HERE"/py313/* "$R/usr/bin/"

rm -rf "$B/py313-root"
mv "$R" "$B/py313-root"
(cd "$B/py313-root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1) \
	> "$B/py313.cpio.gz.tmp"
mv "$B/py313.cpio.gz.tmp" "$B/py313.cpio.gz"
mv "$B/py313.versions.new" "$B/py313.versions"
echo "images: CPython 3.13 piece $(du -k "$B/py313.cpio.gz" | cut -f1) KiB" \
	"($(du -sk "$B/py313-root" | cut -f1) KiB unpacked): $(paste -sd, "$B/py313.versions")"
