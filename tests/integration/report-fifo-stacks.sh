#!/bin/bash
# A FIFO planted as a session's stack table (stacks.def, then stacks.cnt)
# against the readers of call stacks: `opvm report -c`, `opvm export
# --format folded` and `--format html` each end within 10 s (timeout(1)
# kills them otherwise: a hang fails the test, it does not stall it) and
# say which file is not a stack table; the flat report of the same tree
# still prints.  On a real sample tree (tests/golden/mkfixture.c).
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
fixture_tmp report-fifo-stacks
trap 'rm -rf "$tmp"' EXIT
make_fixture "$tmp"
export DEBUGINFOD_URLS=
cur=$(dirname "$(find "$session" -name session.json | head -n 1)")
[ -d "$cur" ] || { echo "FAIL: no samples/current in the fixture"; exit 1; }
common=(--session-dir "$session" --guest-root "t1=$root" --no-host-kernel)

# run NAME CMD...: must end (any status) within 10 s and name the table
run() {
	local name=$1 t0 t1 rc
	shift
	t0=$(date +%s%N)
	timeout 10 "$OPVM" "$@" "${common[@]}" > "$tmp/$name.out" 2> "$tmp/$name.err"
	rc=$?
	t1=$(date +%s%N)
	[ $rc = 124 ] && { echo "FAIL: opvm $* hung on the FIFO (killed after 10 s)"; exit 1; }
	grep -q "$f" "$tmp/$name.out" "$tmp/$name.err" ||
		{ cat "$tmp/$name.out" "$tmp/$name.err"; echo "FAIL: opvm $* does not say which file"; exit 1; }
	echo "RESULT $name: exit $rc after $(( (t1 - t0) / 1000000 )) ms: $(cat "$tmp/$name.out" "$tmp/$name.err" | tr '\n' ' ' | tr -s ' ' | grep -o "[^ ]*: $f[^:]*" | head -n 1)"
}
for f in stacks.def stacks.cnt; do
	rm -f "$cur/stacks.def" "$cur/stacks.cnt"
	# a valid empty table's header (store-stacks.c: magic, version 1),
	# so that the reader gets as far as stacks.cnt
	printf 'OPVMSTK1\001\000\000\000\000\000\000\000' > "$cur/stacks.def"
	rm -f "$cur/$f"
	mkfifo "$cur/$f"
	run "report-$f" report -c
	run "folded-$f" export --format folded
	run "html-$f" export --format html -o "$tmp/fg.html"
done
"$OPVM" report -l "${common[@]}" > "$tmp/flat.txt" 2>&1 || { cat "$tmp/flat.txt"; echo "FAIL: the flat report"; exit 1; }
echo PASS
