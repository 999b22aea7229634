#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# Guest names are data (issue 25): any local user picks a QEMU's -name.
# Four real QEMUs (TCG, no disk: SeaBIOS idles) named with invalid UTF-8,
# terminal escapes (set the title, clear the screen, colour), a newline
# followed by a fake table row, and a quote and backslash.  The same names
# through all three outputs:
#  1. `opvm top --once --format json` parses (python3 json) and lists all
#     four, invalid bytes as U+FFFD, the others as they are;
#  2. `opvm exporter`'s /metrics passes `promtool check metrics` (Debian's
#     prometheus package) and has all four guests;
#  3. text `opvm top --once` has no terminal control byte, one row per
#     guest (the newline cannot plant one), and the names escaped (\x1b, \n).
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v promtool >/dev/null 2>&1 || skip "promtool is not installed (prometheus, scripts/install-deps.sh)"
mk_tmp top-names
T=$(realpath "$T")
P=n$$
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

BADUTF="$P-u"$'\xff\xfe\xc3'"x"
ESCAPES="$P-e"$'\e]0;pwned\a\e[2J\e[31m'"red"
NEWLINE="$P-n"$'\n'"$P-fake  qemu     9  99.0  99.0  99.0"
QUOTE="$P-q\"\\x"
i=0
for n in "$BADUTF" "$ESCAPES" "$NEWLINE" "$QUOTE"; do
	i=$((i + 1))
	start_real "$n" "$T/q$i.qmp"
done

# ---- 1: JSON -----------------------------------------------------------------
"$OPVM" top --once --format json --no-libvirt -f "$P-" -d 0.5 > "$T/top.json" 2> "$T/top.err" ||
	{ cat "$T/top.err"; bad "top --once --format json failed"; }
python3 - "$T/top.json" "$P" <<'EOF' || bad "the JSON snapshot is wrong"
import json, sys
p = sys.argv[2]
try:
    d = json.load(open(sys.argv[1], encoding="utf-8"))
except ValueError as e:
    print("FAIL: the JSON does not parse:", e); sys.exit(1)
names = sorted(g["name"] for g in d["guests"])
print("RESULT top --once --format json: %d guests: %s" % (len(names), [ascii(n) for n in names]))
want = {p + "-u\ufffd\ufffd\ufffdx", p + "-e\x1b]0;pwned\x07\x1b[2J\x1b[31mred",
        p + "-n\n" + p + "-fake  qemu     9  99.0  99.0  99.0", p + '-q"\\x'}
sys.exit(0 if set(names) == want else 1)
EOF

# ---- 2: Prometheus -----------------------------------------------------------
PORT=$(free_port)
if start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" --no-libvirt; then
	curl -sf -m 5 "http://127.0.0.1:$PORT/metrics" > "$T/metrics.txt" || bad "no metrics"
	promtool check metrics < "$T/metrics.txt" > "$T/promtool.txt" 2>&1
	rc=$?
	n=$(grep -ac "^opvm_guest_info{guest=\"$P-" "$T/metrics.txt")
	echo "RESULT promtool check metrics: exit $rc ($(head -c 200 "$T/promtool.txt" | tr '\n' ' ')); $n of 4 guests in opvm_guest_info"
	[ "$rc" = 0 ] || bad "promtool rejects the exposition"
	[ "$n" = 4 ] || bad "$n of the 4 guests are in the exposition"
	kill "$EXP_PID"
else
	bad "the exporter did not start"
fi

# ---- 3: text -----------------------------------------------------------------
"$OPVM" top --once --no-libvirt -f "$P-" -d 0.5 > "$T/top.txt" 2>&1 || bad "top --once failed"
cat -v "$T/top.txt"
ctl=$(LC_ALL=C tr -d '\n\t\040-\176' < "$T/top.txt" | LC_ALL=C tr -d '\200-\377' | wc -c)
raw8=$(LC_ALL=C grep -c $'\xff' "$T/top.txt")
rows=$(grep -c "^$P-" "$T/top.txt")
echo "RESULT top --once text: $ctl control bytes, $raw8 lines with a raw 0xff, $rows rows for 4 guests"
[ "$ctl" = 0 ] || bad "the text output holds $ctl terminal control bytes"
[ "$raw8" = 0 ] || bad "the text output holds invalid UTF-8"
[ "$rows" = 4 ] || bad "$rows rows start with a guest name, not 4 (a planted row?)"
grep -qF "$P-e\\x1b]0;" "$T/top.txt" || bad "the escapes are not shown escaped (\\x1b)"
grep -qF "$P-n\\n$P" "$T/top.txt" || bad "the newline is not shown escaped (\\n)"
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
