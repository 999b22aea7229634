#!/bin/bash
# A planted session directory, played as root with a real second user
# (opvm-trap, made with useradd when missing).  The victim is a directory
# of root's holding root's qemu.log.  Three traps, each given to
# `opvm run -d TRAP` (the test image under TCG):
#  - foreign: the user's /tmp/opvm-trap.* (mode 0777) with guests/guest a
#    link to the victim;
#  - shared: a directory of root's that others may write (mode 1777, sticky)
#    in which the user planted guests/guest, the same link;
#  - link: root's own private session directory with guests/guest a link
#    to the victim (left there, or made by anyone root trusts).
# Each is refused with one message (naming the directory and what to do),
# before QEMU starts: root's qemu.log keeps its inode, size and mtime, no
# console.log or anything else appears in the victim, and nothing but the
# planted link is in the trap.  Before, opvm failed with ELOOP only after
# creating console.log in the victim and truncating its qemu.log.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ "$(id -u)" = 0 ] || skip "needs root, to act as a second user (useradd, setpriv)"
command -v setpriv >/dev/null 2>&1 || skip "setpriv is not installed (util-linux)"
USR=opvm-trap
if ! id -u "$USR" >/dev/null 2>&1; then
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$USR" 2>/dev/null ||
		skip "cannot add the user $USR (useradd)"
fi
UID2=$(id -u "$USR") GID2=$(id -g "$USR")
as_user() { setpriv --reuid="$UID2" --regid="$GID2" --clear-groups "$@"; }
mk_tmp session-planted
TRAPS=""
CLEANUP_HOOK=remove_traps
remove_traps() { for d in $TRAPS; do rm -rf "$d"; done; }

V=$T/victim
mkdir -m 0700 "$V"
echo "root's own QEMU log, which opvm must not truncate" > "$V/qemu.log"
touch -d '2020-01-02 03:04:05' "$V/qemu.log"
before=$(stat -c '%i %s %Y' "$V/qemu.log")

# try NAME TRAP WANT: opvm run -d TRAP refused, WANT in its one message
try() {
	local name=$1 trap=$2 want=$3 rc msgs
	timeout 300 "$OPVM" run --workload syscalls:1 -F 50 -d "$trap" \
		> "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	cat "$T/$name.err"
	[ $rc != 0 ] || fail "$name: opvm run -d $trap succeeded"
	[ $rc != 124 ] || fail "$name: opvm run -d $trap did not end in 300 s"
	# one message (log_err wraps long ones: continuation lines are indented)
	msgs=$(grep -vc '^  ' "$T/$name.err")
	[ "$msgs" = 1 ] || fail "$name: $msgs messages on stderr, not one"
	tr -s '\n ' '  ' < "$T/$name.err" | grep -qF -- "$want" ||
		fail "$name: the message does not say '$want'"
	[ "$(stat -c '%i %s %Y' "$V/qemu.log")" = "$before" ] ||
		fail "$name: root's qemu.log changed ($before -> $(stat -c '%i %s %Y' "$V/qemu.log"))"
	[ "$(ls -A "$V")" = "qemu.log" ] || fail "$name: the victim now holds $(ls -A "$V" | tr '\n' ' ')"
	[ "$(cd "$trap" && find . -mindepth 1 | sort | tr '\n' ' ')" = "./guests ./guests/guest " ] ||
		fail "$name: opvm made $(cd "$trap" && find . -mindepth 1 | tr '\n' ' ') in the trap"
	echo "checked: $name refused, root's qemu.log untouched ($before), nothing made"
}

# foreign: the other user's directory, mode 0777
F=$(as_user mktemp -d /tmp/opvm-trap.XXXXXX) || fail "the user cannot make a directory in /tmp"
TRAPS="$TRAPS $F"
as_user sh -c "chmod 0777 '$F' && mkdir '$F/guests' && chmod 0777 '$F/guests' &&
	ln -s '$V' '$F/guests/guest'" || fail "the user cannot plant the link"
try foreign "$F" "belongs to uid $UID2"

# shared: root's, but others may write it (sticky or not)
S=$(mktemp -d /tmp/opvm-shared.XXXXXX)
TRAPS="$TRAPS $S"
chmod 1777 "$S"
as_user sh -c "mkdir '$S/guests' && ln -s '$V' '$S/guests/guest'" ||
	fail "the user cannot plant the link in the shared directory"
try shared "$S" "is writable by others"

# link: root's own private session directory, a link at guests/guest
L=$T/own
mkdir -m 0700 "$L" "$L/guests"
ln -s "$V" "$L/guests/guest"
try link "$L" "guests/guest is a symbolic link"

echo "RESULT session-planted: 3 planted session directories refused in one message each; root's qemu.log untouched, nothing created"
exit 0
