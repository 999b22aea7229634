#!/bin/bash
# opvm export --format html: one self-contained file (no external assets)
# whose flame graph, drawn by its inline script in headless chromium, holds
# the top symbol of `opvm report -l`; --format folded gives the same counts,
# one line per stack, sorted by stack.
set -u
cd "$(dirname "$0")/../.."
# shellcheck source=tests/integration/fixture-common.bash
. tests/integration/fixture-common.bash
command -v chromium >/dev/null || { echo "SKIP: chromium is missing (apt-get install chromium)"; exit 77; }
fixture_tmp export-html
chrome_pid=""
cleanup() { [ -n "$chrome_pid" ] && kill "$chrome_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
make_fixture "$tmp"

common=(--session-dir "$session" --guest-root "t1=$root" --no-host-kernel)
export DEBUGINFOD_URLS=
"$OPVM" report -l --format json "${common[@]}" > "$tmp/report.json" || exit 1
top=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["symbols"][0]["symbol"])' "$tmp/report.json")
"$OPVM" export --format html -o "$tmp/fg.html" --title "opvm test" "${common[@]}" || exit 1
"$OPVM" export --format folded "${common[@]}" > "$tmp/folded.txt" || exit 1

# Folded: one line per symbol, counts add up to the report's total.
total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_samples"])' "$tmp/report.json")
sum=$(awk '{s += $NF} END {print s}' "$tmp/folded.txt")
grep -q "^t1;prog;prog;$top [0-9]*\$" "$tmp/folded.txt" || { echo "FAIL: folded lacks $top"; cat "$tmp/folded.txt"; exit 1; }
[ "$sum" = "$total" ] || { echo "FAIL: folded sums to $sum, report says $total"; exit 1; }
# Sorted by stack, one line per stack (speedscope keeps a stack in one block).
sed 's/ [0-9]*$//' "$tmp/folded.txt" > "$tmp/stacks.txt"
LC_ALL=C sort -c "$tmp/stacks.txt" || { echo "FAIL: folded lines are not sorted by stack"; exit 1; }
[ "$(sort -u "$tmp/stacks.txt" | wc -l)" = "$(wc -l < "$tmp/stacks.txt")" ] ||
	{ echo "FAIL: a stack appears on two folded lines"; exit 1; }
echo "RESULT folded: $(wc -l < "$tmp/folded.txt") lines, $sum samples"

# Self-contained: nothing fetched from elsewhere.
if grep -Eiq '(src|href)=|@import|url\(' "$tmp/fg.html"; then
	echo "FAIL: the page references external assets"; exit 1
fi

mkdir -p "$tmp/profile"
timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	--no-first-run --user-data-dir="$tmp/profile" --dump-dom "file://$tmp/fg.html" \
	> "$tmp/dom.html" 2> "$tmp/chromium.err" &
chrome_pid=$!
wait "$chrome_pid"; rc=$?; chrome_pid=""
[ $rc = 0 ] || { echo "FAIL: chromium exited $rc"; tail -5 "$tmp/chromium.err"; exit 1; }
# The script-drawn frame (class "f") of the top symbol, not the static table.
if ! grep -q "class=\"f\"[^>]*>$top<" "$tmp/dom.html"; then
	echo "FAIL: the rendered flame graph has no frame for $top"; head -c 2000 "$tmp/dom.html"; exit 1
fi
frames=$(grep -o 'class="f"' "$tmp/dom.html" | wc -l)
echo "RESULT html: $(wc -c < "$tmp/fg.html") bytes, $frames frames drawn, top symbol $top present"
