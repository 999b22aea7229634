#!/bin/bash
# The code's layering (docs/map.md), checked on the sources:
#  1. who may include whom: lib/ only lib/ and the wire format
#     (guest-kmod/opvm_proto.h, for the channel framer); events/ and symbols/ lib/ and
#     themselves; unwind/ lib/ and itself; vmm/ lib/, events/, unwind/,
#     itself and the wire format
#     (guest-kmod/opvm_proto.h); nothing below host/ includes host/; in
#     host/, collect/ does not include cli/ or report/, report/ not cli/;
#  2. no C function longer than 80 lines in lib/, host/, vmm/, unwind/, symbols/,
#     events/, guest-kmod/ (generated protobuf code aside), measured by Universal Ctags
#     (each function's first and last line), not by a regular expression;
#  3. docs/map.md lists every source file (scripts/mkmap.sh --check), and
#     that check fails on a map that leaves one out.
set -u
cd "$(dirname "$0")/../.."
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Exceptions with work under way to remove them (none left: the channel
# framer took the relay's decoder out of vmm/, channel-dump and the store
# are split by job).  Keep this list short: an entry that no longer matches
# is reported so that it gets deleted.
known=""
used=""
exempt() {	# exempt FILE:WHAT: 0 if listed (and remembers it)
	grep -qxF -- "$1" <<<"$known" || return 1
	used="$used$1
"
}

# allowed include prefixes per folder (quoted includes only; <...> are the
# system's).  Every folder that holds C sources needs a rule here, the same as
# docs/map.md's table: a new room without one fails the check.
declare -A allow=(
	[lib]="lib/ guest-kmod/opvm_proto.h"
	[events]="lib/ events/"
	[symbols]="lib/ symbols/"
	[unwind]="lib/ unwind/"
	[vmm]="lib/ events/ unwind/ vmm/ guest-kmod/opvm_proto.h"
	[vmm/qemu]="lib/ events/ unwind/ vmm/ guest-kmod/opvm_proto.h"
	[vmm/kvm]="lib/ events/ unwind/ vmm/ guest-kmod/opvm_proto.h"
	[vmm/perf]="lib/ events/ unwind/ vmm/ guest-kmod/opvm_proto.h"
	[vmm/guest]="lib/ events/ unwind/ vmm/guest/ vmm/libvirt/ vmm/sampler.h guest-kmod/opvm_proto.h"
	[vmm/introspect]="lib/ unwind/ vmm/guest/ vmm/introspect/ guest-kmod/opvm_proto.h"
	[vmm/libvirt]="lib/ vmm/libvirt/"
	[host/collect]="lib/ vmm/ unwind/ events/ guest-kmod/opvm_proto.h host/collect/"
	[host/hoststats]="lib/ vmm/ events/ host/hoststats/"
	[host/report]="lib/ symbols/ events/ host/collect/ host/report/"
	[host/cli]="lib/ vmm/ unwind/ symbols/ events/ guest-kmod/opvm_proto.h host/"
)
TOPS="lib events symbols unwind vmm host"

# check_includes ROOT: every quoted include of every C file in every folder
# under $TOPS in ROOT against its folder's rule; prints one FAIL line each.
check_includes() {
	local root=$1 dir f inc p ok
	while IFS= read -r dir; do
		dir=${dir#"$root"/}
		ls "$root/$dir"/*.[ch] >/dev/null 2>&1 || continue
		if [ -z "${allow[$dir]+set}" ]; then
			echo "FAIL: $dir/ holds C sources but has no rule (add it to docs/map.md and $0)"
			continue
		fi
		for f in "$root/$dir"/*.[ch]; do
			while IFS= read -r inc; do
				echo "INC"
				ok=0
				for p in ${allow[$dir]}; do
					case "$inc" in "$p"*) ok=1 ;; esac
				done
				[ $ok = 1 ] && continue
				grep -qxF -- "$dir/${f##*/}:$inc" <<<"$known" && {
					echo "USED $dir/${f##*/}:$inc"; continue; }
				echo "FAIL: $dir/${f##*/} includes \"$inc\": $dir/ may include only ${allow[$dir]}"
			done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
		done
	done < <(cd "$root" && find $TOPS -type d | sed "s#^#$root/#" | sort)
}

# The check checks itself: a planted include that climbs (vmm/qemu/ into
# host/cli/) and a room without a rule must both be caught.
plant=$(mktemp -d)
mkdir -p "$plant/vmm/qemu" "$plant/vmm/newroom" "$plant/lib"
printf '#include "host/cli/commands.h"\n' >"$plant/vmm/qemu/planted.c"
printf '#include "lib/array.h"\n' >"$plant/vmm/newroom/x.c"
planted=$(TOPS="vmm" check_includes "$plant" | grep -c '^FAIL')
rm -rf "$plant"
[ "$planted" = 2 ] || bad "the include check missed a planted include or an unruled room ($planted of 2 caught)"

out=$(check_includes .)
includes=$(grep -c '^INC$' <<<"$out")
used=$(sed -n 's/^USED //p' <<<"$out")
while IFS= read -r l; do
	[ -n "$l" ] && { echo "$l"; fail=1; }
done < <(grep '^FAIL' <<<"$out")

CTAGS=$(command -v ctags-universal || command -v ctags)
if [ -z "$CTAGS" ] || ! "$CTAGS" --version 2>/dev/null | grep -q Universal; then
	echo "SKIP: Universal Ctags is not installed (scripts/install-deps.sh installs universal-ctags)"
	exit 77
fi
MAX=80
srcs=$(ls lib/*.c host/*.c host/*/*.c vmm/*.c vmm/*/*.c unwind/*.c symbols/*.c events/*.c \
	guest-kmod/*.c 2>/dev/null | grep -v '\.pb-c\.c$')
# shellcheck disable=SC2086
long=$("$CTAGS" --fields=+ne --c-kinds=f -f - $srcs | awk -F'\t' -v max=$MAX '
	{ l = e = 0
	  for (i = 4; i <= NF; i++) {
		if ($i ~ /^line:/) l = substr($i, 6)
		if ($i ~ /^end:/) e = substr($i, 5)
	  }
	  n++
	  if (!e) { print "?", $2, $1, "(no end line)"; next }
	  if (e - l + 1 > max) print e - l + 1, $2, $1 }
	END { print n > "/dev/stderr" }' 2>"${TMPDIR:-/tmp}/layering.$$")
nfun=$(cat "${TMPDIR:-/tmp}/layering.$$"); rm -f "${TMPDIR:-/tmp}/layering.$$"
[ "${nfun:-0}" -gt 100 ] || bad "ctags found only ${nfun:-0} functions: the check is not looking"
while read -r n f name rest; do
	[ -n "$n" ] || continue
	exempt "$f:$name" && continue
	bad "$f: $name() is $n lines (at most $MAX): split it by job"
done <<<"$long"
while read -r k; do
	[ -n "$k" ] && ! grep -qxF -- "$k" <<<"$used" &&
		echo "NOTE: exception $k is no longer needed: delete it from $0"
done <<<"$known"
# docs/map.md lists every source file (scripts/mkmap.sh makes the list)
if ! out=$(scripts/mkmap.sh --check); then
	echo "$out"
	fail=1
fi
# and the map's check checks itself: a copy of the map without one
# file's line (unwind/fp.c's) must fail it
mapcopy=$(mktemp)
grep -vF -- '- `fp.c`: ' docs/map.md >"$mapcopy"
if ! cmp -s "$mapcopy" docs/map.md && MAP="$mapcopy" scripts/mkmap.sh --check >/dev/null; then
	bad "scripts/mkmap.sh --check passed a map without unwind/fp.c"
fi
cmp -s "$mapcopy" docs/map.md && bad "docs/map.md has no line for unwind/fp.c to leave out"
rm -f "$mapcopy"
[ $fail = 0 ] || exit 1
echo "RESULT layering: docs/map.md lists every file (a map without one fails); $includes includes checked in every folder (and a planted one caught), $nfun functions in $(wc -w <<<"$srcs") files, none over $MAX lines; $(grep -c . <<<"$used") known exceptions"
