#!/bin/bash
# One option table per command (host/cli/options.h): every option of each
# command's table (`opvm CMD --dump-options`) appears in `opvm CMD --help`
# (with its short letter), in the command's man page (scripts/mkman.sh) and
# in what bash completion offers after `opvm CMD --`; an unknown option,
# long or short, is one line on stderr, nothing on stdout, and exit 2, for
# every command and for opvm itself.  Every numeric option, as the table
# itself says (--dump-options' last column: the row's parser, uint, octal,
# size, decimal, duration or time), given 100x, 1x, -1, a 20-digit number,
# '', ' 5', 0x10 or nan is the same: one line naming it, exit 2; a
# backend's options are tried with that backend chosen (--vmm=kvm); a name
# not in an option's list (an enum row) gets one line and exit 2 too; and an
# option whose value is named like a number (N, S, HZ, MB, PCT, SIZE, MASK,
# PID, TIME) but is parsed as text fails the test.  No guest: a few seconds.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.."
[ -x "$OPVM" ] || { echo "FAIL: $OPVM not built"; exit 1; }
command -v help2man >/dev/null || { echo "SKIP: help2man is not installed (scripts/install-deps.sh)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
T=$(mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/cli-options.XXXXXX")
trap 'rm -rf "$T"' EXIT

scripts/mkman.sh "$OPVM" "$T/man" >"$T/mkman.log" 2>&1 || { cat "$T/mkman.log"; fail "scripts/mkman.sh"; }
complete_words() {	# complete_words WORD... : what TAB offers for the last word
	bash -c 'source scripts/opvm-completion.bash; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		_opvm; printf "%s\n" "${COMPREPLY[@]}"' _ "$OPVM" "$@"
}
# one line on stderr, nothing on stdout, exit 2
one_line_error() {	# one_line_error WHAT ARGS...
	local what=$1 rc
	shift
	"$OPVM" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	[ $rc = 2 ] || fail "opvm $* exits $rc, not 2"
	[ ! -s "$T/out" ] || fail "opvm $*: prints on stdout: $(head -2 "$T/out")"
	[ "$(wc -l <"$T/err")" = 1 ] || fail "opvm $*: $(wc -l <"$T/err") lines on stderr: $(head -3 "$T/err")"
	grep -qF -- "unknown option '$what'" "$T/err" || fail "opvm $*: $(cat "$T/err")"
}

# a bad number: one line on stderr naming the option, nothing on stdout,
# exit 2, and nothing started (a value taken would boot or attach)
bad_value() {	# bad_value OPT[,SHORT] VALUE ARGS...
	local opt=$1 val=$2 rc
	shift 2
	timeout 20 "$OPVM" "$@" >"$T/out" 2>"$T/err"
	rc=$?
	[ $rc = 2 ] || fail "opvm $* exits $rc, not 2: $(head -2 "$T/err")"
	[ ! -s "$T/out" ] || fail "opvm $*: prints on stdout: $(head -2 "$T/out")"
	[ "$(wc -l <"$T/err")" = 1 ] || fail "opvm $* ('$val'): $(wc -l <"$T/err") lines on stderr: $(head -3 "$T/err")"
	grep -qF -e "${opt%%,*}" -e "${opt#*,}" "$T/err" ||
		fail "opvm $*: the message does not name $opt: $(cat "$T/err")"
}

cmds=$("$OPVM" help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}')
nc=0 no=0 nb=0 nn=0 ne=0
for c in $cmds; do
	case $c in help|version) continue ;; esac
	"$OPVM" "$c" --dump-options >"$T/dump" || fail "opvm $c --dump-options exits $?"
	[ -s "$T/dump" ] || fail "opvm $c --dump-options is empty"
	"$OPVM" "$c" --help >"$T/help" || fail "opvm $c --help exits $?"
	sed 's/\\-/-/g' "$T/man/opvm-$c.1" >"$T/page"
	complete_words "$c" -- >"$T/compl"
	while IFS=$'\t' read -r cmd long short meta group parser; do
		[ "$cmd" = "$c" ] || fail "opvm $c --dump-options: a line of '$cmd'"
		[ -n "$parser" ] && [ "$parser" != - ] || fail "opvm $c --dump-options: $long has no parser"
		if [ "$long" != - ]; then
			grep -qE -- "(^|[ ,])$long( |\$)" "$T/help" || fail "opvm $c --help lacks $long"
			grep -qF -- "$long" "$T/page" || fail "opvm-$c.1 lacks $long"
			grep -qx -- "$long" "$T/compl" || fail "completion of 'opvm $c --' lacks $long"
			[ "$short" = - ] || grep -qE -- "^  $short, $long( |\$)" "$T/help" ||
				fail "opvm $c --help lacks '$short, $long'"
		else
			grep -qE -- "^  $short( |\$)" "$T/help" || fail "opvm $c --help lacks $short"
			grep -qF -- "$short" "$T/page" || fail "opvm-$c.1 lacks $short"
		fi
		no=$((no + 1))
	done <"$T/dump"
	one_line_error --no-such-option "$c" --no-such-option
	while IFS=$'\t' read -r _ long short meta group parser; do
		pre=()	# a backend's option: with its backend chosen
		case $group in --*=*) pre=("$group") ;; esac
		case ${parser%%:*} in
		uint|octal|size|decimal|duration|time) ;;
		enum)	bad_value "$long" nosuch "$c" "${pre[@]}" "$long" nosuch
			ne=$((ne + 1))
			continue ;;
		*)	case $meta in N|S|HZ|MB|PCT|SIZE|MASK|PID|TIME)
				fail "opvm $c $long $meta is parsed as '$parser', not as a number" ;;
			esac
			continue ;;
		esac
		names=$long,$short
		[ "$long" != - ] || { long=$short; names=$short; }
		for v in 100x 1x -1 99999999999999999999 '' ' 5' 0x10 nan; do
			bad_value "$names" "$v" "$c" "${pre[@]}" "$long" "$v"
			nb=$((nb + 1))
		done
		nn=$((nn + 1))
	done <"$T/dump"
	one_line_error --no-such-option "$c" --no-such-option=1
	grep -q "	-Q	" "$T/dump" && fail "pick another letter than -Q for $c"
	one_line_error -Q "$c" -Q
	nc=$((nc + 1))
done
[ $nc -ge 9 ] || fail "only $nc commands"
[ $nn -ge 40 ] || fail "only $nn numeric options"
[ $nb -ge 320 ] || fail "only $nb bad numbers tried"
one_line_error --no-such-option --no-such-option report
echo "RESULT cli options: $nc commands, $no options each in --help, man page and completion; unknown options, $nn numeric options x 8 bad values = $nb and $ne lists given a name not in them, one line and exit 2"
