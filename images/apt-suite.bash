# Sourced by images/kernel-image.sh and images/py313.sh: apt-get for a
# Debian suite other than the host's, with a private sources list and
# state (the host's apt configuration and installed packages play no
# part).  $OPVM_DEBIAN_MIRROR picks the mirror.
#
#   apt_suite DIR SUITE   sets APT (apt-get's and apt-cache's options for
#                         DIR), updates the lists once a day at most;
#                         returns 1 when the update fails (the network?)
MIRROR=${OPVM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
apt_suite() {
	local a=$1 suite=$2
	mkdir -p "$a/lists/partial" "$a/cache/archives/partial"
	echo "deb $MIRROR $suite main" > "$a/sources.list"
	: > "$a/status"
	APT=(-o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts=/dev/null
		-o Dir::State::status="$a/status" -o Dir::Etc::preferences=/dev/null
		-o Dir::Etc::preferencesparts=/dev/null
		-o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Debug::NoLocking=1)
	[ "$(id -u)" = 0 ] && APT+=(-o APT::Sandbox::User=root)
	if [ -z "$(find "$a/lists" -name '*Packages*' -mtime -1 2>/dev/null | head -1)" ]; then
		apt-get "${APT[@]}" -qq update >&2 || return 1
	fi
	return 0
}
