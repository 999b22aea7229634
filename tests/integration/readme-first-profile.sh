#!/bin/bash
# The README's "A first profile", as a new user types it: `opvm run
# --workload abratio` in a directory of its own, then report, annotate and
# export with no symbol flags (no --guest-root, --system-map, --vmlinux) run
# from another directory.  The session's session.json remembers where the
# test image's symbols are.  Asserts resolved symbols: abratio's func_b
# (func_a when sampled: 1 % of its time) and named kernel functions.  Then
# every command's default output on this session (and every command's help)
# must fit 80 columns: a line wider than 80 fails the test.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp readme-first-profile
OPVM=$(realpath "$OPVM")
T=$(realpath "$T")
mkdir -p "$T/work" "$T/elsewhere"

cd "$T/work" || fail "no $T/work"
"$OPVM" run --workload abratio -F 200 > "$T/run.out" 2> "$T/run.err"
rc=$?
cat "$T/run.out" "$T/run.err"
[ $rc = 0 ] || fail "opvm run exited with $rc"
S=$T/work/opvm_data
grep -q "^next: opvm report --session-dir ./opvm_data\$" "$T/run.out" ||
	fail "the summary's next: line names symbol flags or another session"

cd "$T/elsewhere" || fail "no $T/elsewhere"
"$OPVM" report -l --session-dir "$S" > "$T/report.txt" 2>&1 ||
	{ cat "$T/report.txt"; fail "opvm report -l failed"; }
"$OPVM" annotate --session-dir "$S" func_b > "$T/annotate.txt" 2>&1 ||
	{ cat "$T/annotate.txt"; fail "opvm annotate func_b failed"; }
"$OPVM" export --session-dir "$S" --format folded -o prof.folded > "$T/export.out" 2>&1 ||
	{ cat "$T/export.out"; fail "opvm export --format folded failed"; }
head -20 "$T/report.txt"
head -12 "$T/annotate.txt"

grep -Eq '^[0-9]+ .*abratio +abratio +func_b$' "$T/report.txt" || fail "report -l: no func_b"
# func_a is 1 % of abratio's time: ~2 of ~200 samples in a 3 s run, so a
# run may miss it.  abratio's samples are named (func_a, func_b or libc
# code linked in), but for at most 1 %: its ELF has 200 bytes of .plt
# stubs (static ifuncs) and startup code without symbols: one CI run had
# an abratio "(no symbols)" row (func_b 313 of abratio's 316 samples).
awk '$3 == "abratio" && $4 == "abratio" { all += $1; if ($5 == "(no")
	none += $1 } END { print "RESULT abratio samples without a symbol: " none + 0 " of " all + 0
	exit !(all > 0 && none * 100 <= all) }' "$T/report.txt" ||
	fail "report -l: more than 1 % of abratio's samples without a symbol"
fa=$(awk '$NF == "func_a" && $3 == "abratio" {print $1}' "$T/report.txt")
# a kernel function by name (the idle loop runs on every boot), under any
# app: a process's kernel time is filed under it by default
kern=$(grep -Ec '^[0-9]+ .* vmlinux +[^ ]+ +[a-z_][a-z0-9_.]+$' "$T/report.txt")
[ "$kern" -ge 5 ] || fail "report -l: $kern named kernel functions (want >= 5)"
grep -q '^/\* func_b: [0-9]* samples' "$T/annotate.txt" || fail "annotate: func_b has no samples"
grep -Eq '^ +[0-9]+ +[0-9.]+ :' "$T/annotate.txt" || fail "annotate: no instruction with samples"
grep -q ';abratio;abratio;func_b [0-9]*$' "$T/elsewhere/prof.folded" || fail "export: no func_b stack"
grep -q ';vmlinux;native_safe_halt [0-9]*$' "$T/elsewhere/prof.folded" ||
	fail "export: kernel stacks are not named"
echo "RESULT report/annotate/export without symbol flags: func_b, func_a (${fa:-0} samples) and $kern kernel functions named"

# ---- JSON: a version, and the text footer's warnings ------------------------
"$OPVM" report -l --format json --session-dir "$S" > "$T/report.json" 2>&1 ||
	{ cat "$T/report.json"; fail "opvm report -l --format json failed"; }
python3 - "$T/report.json" "$T/report.txt" <<'PY' || fail "JSON report and text report disagree"
import json, re, sys
d = json.load(open(sys.argv[1]))
assert d.get("version") == 1, "no \"version\": 1"
# the text's "warning: ..." sentences, joined back over their wrapped lines
# (a warning ending in ':' heads a list of images: not a sentence)
sentences, cont = [], False
for line in open(sys.argv[2]).read().splitlines():
    if line.startswith("warning: "):
        cont = not line.endswith(":")
        if cont:
            sentences.append(line[9:])
    elif cont and line.startswith("  "):
        sentences[-1] += " " + line.strip()
        if sentences[-1].endswith(":"):   # a wrapped list head
            sentences.pop()
            cont = False
    else:
        cont = False
missing = [t for t in sentences if t not in d["warnings"]]
if missing:
    print("FAIL: text warnings missing from JSON:", missing, "JSON has:", d["warnings"])
    sys.exit(1)
print("RESULT JSON report: version 1, %d warnings (the text report's %d sentences)"
      % (len(d["warnings"]), len(sentences)))
PY

# ---- idle and boot are their own lines ----------------------------------------
"$OPVM" report --session-dir "$S" > "$T/report-summary.txt" 2>&1
"$OPVM" report -l --exclude idle,boot --session-dir "$S" > "$T/report-excl.txt" 2>&1 ||
	{ cat "$T/report-excl.txt"; fail "opvm report --exclude idle,boot failed"; }
"$OPVM" export --format folded --exclude idle,boot --session-dir "$S" -o "$T/excl.folded" \
	> "$T/export-excl.txt" 2>&1 || { cat "$T/export-excl.txt"; fail "export --exclude failed"; }
python3 - "$T/report-summary.txt" "$T/report-excl.txt" "$T/excl.folded" "$T/report.txt" <<'PY' ||
import re, sys
summ, excl, folded, rl = (open(f).read() for f in sys.argv[1:5])
def line(name):
    m = re.search(r"^ *(\d+) +([\d.]+) +" + re.escape(name) + "$", summ, re.M)
    return (int(m.group(1)), float(m.group(2))) if m else (0, 0.0)
total = int(re.search(r"event \S+, (\d+) samples", summ).group(1))
idle, boot = line("(idle)"), line("(firmware/boot)")
print("RESULT demo profile: (firmware/boot) %d samples (%.1f%%), (idle) %d (%.1f%%) of %d"
      % (boot[0], boot[1], idle[0], idle[1], total))
fails = []
if boot[0] < total // 20 or idle[0] < total // 20:
    fails.append("(firmware/boot) or (idle) under 5 % of a demo that boots and idles")
m = re.search(r"left out \(--exclude\): \(idle\) (\d+), \(firmware/boot\) (\d+) samples", excl)
left = int(re.search(r"event \S+, (\d+) samples", excl).group(1))
if not m or (int(m.group(1)), int(m.group(2))) != (idle[0], boot[0]):
    fails.append("--exclude does not say what it left out, or says other counts")
if left != total - idle[0] - boot[0]:
    fails.append("--exclude total %d, want %d" % (left, total - idle[0] - boot[0]))
if not re.search(r"^\d+ .* vmlinux +\(firmware/boot\) +\(no symbols\)$", rl, re.M) or \
        not re.search(r"^\d+ .* vmlinux +\(idle\) +native_safe_halt$", rl, re.M):
    fails.append("report -l does not name the (firmware/boot) and (idle) apps whole")
if "(idle)" in folded or "(firmware/boot)" in folded:
    fails.append("export --exclude kept idle or boot stacks")
print("RESULT --exclude idle,boot: %d samples left, the header says what went" % left)
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
	fail "idle and boot lines"

# ---- 80 columns --------------------------------------------------------------
"$OPVM" annotate --source --session-dir "$S" func_b > "$T/annotate-src.txt" 2>&1
"$OPVM" report -l --details --session-dir "$S" > "$T/report-details.txt" 2>&1
"$OPVM" report --by app --session-dir "$S" > "$T/report-by.txt" 2>&1
"$OPVM" export --session-dir "$S" > "$T/export-noformat.txt" 2>&1
"$OPVM" list-events > "$T/list-events.txt" 2>&1
"$OPVM" help > "$T/help.txt" 2>&1
"$OPVM" version > "$T/version.txt" 2>&1
cmds=$(awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} /^$/ && on {on = 0}' "$T/help.txt")
[ "$(echo "$cmds" | wc -w)" -ge 10 ] || fail "opvm help lists only: $cmds"
for c in $cmds; do
	"$OPVM" help "$c" > "$T/help-$c.txt" 2>&1
done
wide=0 files=0
for f in "$T"/run.out "$T"/run.err "$T"/report*.txt "$T"/annotate*.txt "$T"/export*.txt \
	 "$T"/export.out "$T"/list-events.txt "$T"/help*.txt "$T"/version.txt; do
	files=$((files + 1))
	n=$(awk 'length($0) > 80' "$f" | wc -l)
	if [ "$n" -gt 0 ]; then
		echo "over 80 columns in $(basename "$f"):"
		awk 'length($0) > 80 {print length($0) ": " $0}' "$f" | head -5
		wide=$((wide + n))
	fi
done
[ $wide = 0 ] || fail "$wide lines wider than 80 columns"
echo "RESULT 80 columns: $files outputs (run, report, report -l/--details/--by, annotate, export, list-events, help of $(echo $cmds | wc -w) commands), no line wider than 80"
echo PASS
