#!/bin/bash
# The CLI's own help: `opvm help`, `opvm help CMD`, `opvm version`, and the
# bash completion (commands from the help text, options from the tables)
# completing commands, options
# and `help CMD`; `make install` puts the binary and completion in place.
# (cli-options.sh checks each option table against help, man and completion.)
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."
[ -x "$OPVM" ] || { echo "FAIL: $OPVM not built"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
T=$(mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/cli-help.XXXXXX")
trap 'rm -rf "$T"' EXIT

[ "$("$OPVM" version)" = "opvm $(cat VERSION)" ] || fail "opvm version: $("$OPVM" version)"
[ "$("$OPVM" --version)" = "opvm $(cat VERSION)" ] || fail "opvm --version"
cmds=$("$OPVM" help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
for c in run attach report annotate export list-events channel-dump help version; do
	grep -qx "$c" <<<"$cmds" || fail "opvm help does not list $c"
done
for c in $cmds; do
	[ "$c" = help ] || [ "$c" = version ] || {
		"$OPVM" help "$c" >"$T/h" 2>&1 || fail "opvm help $c exits $?"
		grep -q "usage: opvm $c" "$T/h" || fail "opvm help $c: $(head -2 "$T/h")"
	}
done
"$OPVM" help nosuch >/dev/null 2>"$T/e" && fail "opvm help nosuch exits 0"
grep -q "is not an opvm command" "$T/e" || fail "opvm help nosuch: $(cat "$T/e")"

complete_words() {	# complete_words WORD... : what TAB offers for the last word
	bash -c 'source scripts/opvm-completion.bash; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_opvm; printf "%s\n" "${COMPREPLY[@]}"' _ "$OPVM" "$@"
}
[ "$(complete_words rep)" = report ] || fail "completion of 'rep': $(complete_words rep)"
complete_words report --thr | grep -qx -- '--threshold' || fail "completion of 'report --thr'"
complete_words run --ker | grep -q -- '--kernel' || fail "completion of 'run --ker'"
[ "$(complete_words help ann)" = annotate ] || fail "completion of 'help ann'"

make -s install PREFIX="$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "make install"; }
[ -x "$T/prefix/bin/opvm" ] || fail "make install: no bin/opvm"
[ -f "$T/prefix/share/bash-completion/completions/opvm" ] || fail "make install: no completion"
# An installed opvm has no build/images beside it: --workload says how to
# point it at the test images (OPVM_IMAGES), from a directory without them.
A=$(realpath "$T")
( cd "$A" && env -u OPVM_IMAGES "$A/prefix/bin/opvm" run --workload abratio -d "$A/x" ) \
	>"$T/noimg.out" 2>&1 && fail "installed opvm booted without images"
# (messages are wrapped at 80 columns: compare them as one line)
oneline() { tr '\n' ' ' < "$1" | tr -s ' '; }
oneline "$T/noimg.out" | grep -q "OPVM_IMAGES=DIR" || fail "no hint at OPVM_IMAGES: $(cat "$T/noimg.out")"
( cd "$A" && OPVM_IMAGES="$A/none" "$A/prefix/bin/opvm" run --workload abratio -d "$A/x" ) \
	>"$T/badimg.out" 2>&1 && fail "opvm booted with OPVM_IMAGES pointing nowhere"
oneline "$T/badimg.out" | grep -q "OPVM_IMAGES=$A/none holds no vmlinuz" || fail "$(cat "$T/badimg.out")"

# Man pages: one per command plus opvm(1), each renders without a warning
# and names every long option its command's --help gives.
pages=0
for c in "" $cmds; do
	case $c in help|version) continue ;; esac
	name=opvm${c:+-$c}
	page=$T/prefix/share/man/man1/$name.1
	[ -f "$page" ] || fail "make install: no man page $name.1"
	MANWIDTH=80 man --warnings -l "$page" >"$T/man.txt" 2>"$T/man.err" || fail "man -l $name.1"
	[ ! -s "$T/man.err" ] || fail "man -l $name.1 warns: $(head -3 "$T/man.err")"
	grep -q "^NAME" "$T/man.txt" && grep -q "^EXAMPLES" "$T/man.txt" || fail "$name.1 lacks NAME or EXAMPLES"
	if [ -n "$c" ]; then
		for o in $("$OPVM" "$c" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
			grep -q -- "$o" "$T/man.txt" || fail "$name.1 does not name $o"
		done
	fi
	pages=$((pages + 1))
done
echo "RESULT cli help: $(wc -l <<<"$cmds") commands, each with help; $pages man pages render; completion and install checked"
