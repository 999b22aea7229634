#!/bin/bash
# MiniDebugInfo: the fixture's program made the way Fedora's find-debuginfo
# makes its binaries (the function symbols that .dynsym lacks, xz'd into a
# small ELF added as .gnu_debugdata, everything else stripped).  Asserts:
#  - control: the stripped program without .gnu_debugdata names none of
#    func_a/func_b (they are not in .dynsym);
#  - with it, `opvm report -l` (no debug file anywhere, no debuginfod)
#    names func_b 1100 and func_a 450, the fixture's truth;
#  - a .gnu_debugdata that is not xz (corrupt) leaves the report complete,
#    .dynsym's names only.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
for t in xz nm objcopy strip python3; do
	command -v $t >/dev/null || { echo "SKIP: $t is missing"; exit 77; }
done
fixture_tmp report-minidebuginfo
trap 'rm -rf "$tmp"' EXIT
make_fixture "$tmp"
prog=$root/usr/bin/prog
w=$tmp/mini
mkdir -p "$w"
# find-debuginfo.sh's add_minidebug()
objcopy --only-keep-debug "$prog" "$w/debug"
strip -o "$w/stripped" "$prog"
nm -D "$prog" --format=posix --defined-only | awk '{ print $1 }' | sort > "$w/dynsyms"
nm "$w/debug" --format=posix --defined-only |
	awk '{ if ($2 == "T" || $2 == "t" || $2 == "D") print $1 }' | sort > "$w/funcsyms"
comm -13 "$w/dynsyms" "$w/funcsyms" > "$w/keep"
grep -qx func_b "$w/keep" || { echo "FAIL: func_b is in .dynsym: no test"; exit 1; }
objcopy -S --remove-section .gdb_index --remove-section .comment \
	--keep-symbols="$w/keep" "$w/debug" "$w/mini_debuginfo"
xz -k "$w/mini_debuginfo"
cp "$w/stripped" "$w/withmini"
objcopy --add-section .gnu_debugdata="$w/mini_debuginfo.xz" "$w/withmini"
head -c 4096 /dev/urandom > "$w/garbage"
cp "$w/stripped" "$w/badmini"
objcopy --add-section .gnu_debugdata="$w/garbage" "$w/badmini"
echo "RESULT .gnu_debugdata: $(stat -c %s "$w/mini_debuginfo.xz") bytes xz, $(wc -l < "$w/keep") symbols"

unset DEBUGINFOD_URLS
names() {	# names VARIANT: func_b func_a samples
	cp "$w/$1" "$prog"
	"$OPVM" report -l --format json --session-dir "$session" --guest-root "t1=$root" \
		--no-host-kernel guest:t1 image:/usr/bin/prog > "$tmp/$1.json" ||
		{ echo "FAIL: report ($1)"; exit 1; }
	python3 -c 'import json, sys
rows = {r["symbol"]: r["samples"] for r in json.load(open(sys.argv[1]))["symbols"]}
print(rows.get("func_b", 0), rows.get("func_a", 0), sum(rows.values()))' "$tmp/$1.json"
}
read -r b a tot < <(names stripped)
echo "RESULT stripped, no .gnu_debugdata: func_b $b, func_a $a of $tot"
[ "$b" = 0 ] && [ "$a" = 0 ] || { echo "FAIL: the control names them"; exit 1; }
read -r b2 a2 tot2 < <(names withmini)
echo "RESULT with .gnu_debugdata: func_b $b2, func_a $a2 of $tot2"
[ "$b2" = 1100 ] && [ "$a2" = 450 ] || { echo "FAIL: MiniDebugInfo not read"; exit 1; }
read -r b3 a3 tot3 < <(names badmini)
echo "RESULT with a corrupt .gnu_debugdata: func_b $b3, func_a $a3 of $tot3"
[ "$b3" = 0 ] && [ "$tot3" = "$tot" ] || { echo "FAIL: corrupt .gnu_debugdata"; exit 1; }
echo PASS
