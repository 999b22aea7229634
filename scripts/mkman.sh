#!/bin/sh
# Man pages for opvm and each of its commands, written by help2man from the
# binary's own --help text, which each command prints from its option table
# (host/cli/options.h; the same table drives its parsing and the bash
# completion), plus the hand-written sections in docs/man/*.h2m (name,
# examples, files, see also).  A page that misses an option of the table
# (`opvm CMD --dump-options`) fails here, as does a command without its
# .h2m file: a new command needs its page text.
# Usage: scripts/mkman.sh OPVM OUTDIR
set -eu
opvm=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
src=$(cd "$(dirname "$0")/.." && pwd)/docs/man
command -v help2man >/dev/null || { echo "mkman: help2man is not installed (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out/bin"
version=$("$opvm" version | cut -d' ' -f2)

page() {	# page NAME PROGRAM
	[ -f "$src/$1.h2m" ] || { echo "mkman: no docs/man/$1.h2m: write the page's name, examples and see-also there" >&2; exit 1; }
	help2man --no-info --no-discard-stderr --version-string="$version" \
		--include="$src/$1.h2m" --output="$out/$1.1" "$2"
}

page opvm "$opvm"
for c in $("$opvm" help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
	case $c in help|version) continue ;; esac
	printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$opvm" "$c" >"$out/bin/opvm-$c"
	chmod 755 "$out/bin/opvm-$c"
	page "opvm-$c" "$out/bin/opvm-$c"
	sed 's/\\-/-/g' "$out/opvm-$c.1" >"$out/bin/page"
	for o in $("$opvm" "$c" --dump-options | cut -f2 | grep -- '^--'); do
		grep -qF -- "$o" "$out/bin/page" ||
			{ echo "mkman: opvm-$c.1 does not name $o" >&2; exit 1; }
	done
done
rm -rf "$out/bin"
