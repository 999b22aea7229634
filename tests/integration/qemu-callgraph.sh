#!/bin/bash
# Call graphs (-g) on the test image under TCG, the syscalls workload:
#   - kernel stacks by the guest kernel's own ORC tables: of the kernel
#     samples of the syscalls process, >= 90 % have a stack that reaches
#     the user task (through the syscall entry, or an interrupt's), and the
#     ones in a system call go on into its user caller;
#   - every filed sample is in the stack table (report's JSON: stack_samples
#     == total_samples, less chains counted as dropped);
#   - the folded export's widths match the report: per leaf symbol, the
#     folded counts add up to report -l's samples;
#   - `go tool pprof -traces` on the pprof export prints multi-frame stacks,
#     and the HTML flame graph holds chains deeper than guest/process/symbol;
#   - report --callgraph lists callers and callees; a session without -g
#     says how to record them.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-callgraph

"$OPVM" run --workload syscalls -F 200 -g -d "$T/s" > "$T/run.out" 2>&1 ||
	{ cat "$T/run.out"; fail "opvm run -g failed"; }
grep -A4 "call graphs" "$T/run.out"
"$OPVM" report -d "$T/s" --format json > "$T/report.json" || fail "report --format json"
"$OPVM" export -d "$T/s" --format folded -o "$T/s.folded" 2>/dev/null || fail "export folded"
"$OPVM" export -d "$T/s" --format pprof -o "$T/s.pb.gz" 2>/dev/null || fail "export pprof"
"$OPVM" export -d "$T/s" --format html -o "$T/s.html" 2>/dev/null || fail "export html"
"$OPVM" report -d "$T/s" --callgraph > "$T/cg.txt" 2>&1 || { cat "$T/cg.txt"; fail "report --callgraph"; }
HOME=$T GOCACHE=$T/gocache go tool pprof -traces "$T/s.pb.gz" > "$T/traces.txt" 2> "$T/pprof.err" ||
	{ cat "$T/pprof.err"; fail "go tool pprof -traces"; }

python3 - "$T/report.json" "$T/s.folded" "$T/traces.txt" "$T/s.html" "$T/cg.txt" \
	"$T/s/guests/guest/samples/current/session.json" <<'PY' || fail "call graphs"
import json, re, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo
rep, folded, traces, html, cg, sess = sys.argv[1:7]
j = json.load(open(rep))
s = json.load(open(sess))
fails = []
dropped = s["store"].get("stacks_dropped", 0)
if j.get("stack_samples", 0) + dropped != j["total_samples"]:
    fails.append("stack table %s + %d dropped != %d samples" % (j.get("stack_samples"), dropped, j["total_samples"]))
if dropped * 100 > j["total_samples"]:
    fails.append("%d chains dropped" % dropped)
# kernel samples of the syscalls process (about 140 at 200 Hz here; fewer
# on a loaded host, whose ticks are throttled)
kern = sysc = reach = sys_reach = nsys = 0
for st in j["stacks"]:
    if st["app"].endswith("/syscalls"):
        nsys += st["samples"]
    if not st["app"].endswith("/syscalls") or not st["frames"][0]["kernel"]:
        continue
    n = st["samples"]
    kern += n
    names = [f["symbol"] or "" for f in st["frames"]]
    user = any(not f["kernel"] for f in st["frames"])
    reach += n if user else 0
    if any(x.startswith("entry_SYSCALL_64") or x == "do_syscall_64" for x in names):
        sysc += n
        sys_reach += n if user else 0
print("RESULT kernel stacks of syscalls: %d samples, %.1f%% reach the user task; "
      "%d in a system call, %.1f%% of them on into the caller"
      % (kern, 100.0 * reach / max(kern, 1), sysc, 100.0 * sys_reach / max(sysc, 1)))
# minimums from what the run sampled: syscalls is mostly kernel time, and
# most of that in system calls (3 sigma, tests/integration/bounds.py)
if not kern or kern < count_lo(nsys, 0.5) or reach < count_lo(kern, 0.9):
    fails.append("kernel stacks reaching user space: %d of %d" % (reach, kern))
if not sysc or sysc < count_lo(kern, 0.5) or sys_reach < count_lo(sysc, 0.9):
    fails.append("system-call stacks reaching the caller: %d of %d" % (sys_reach, sysc))
# folded widths = report -l per leaf symbol
leaf = {}
total = 0
for line in open(folded):
    stack, n = line.rsplit(" ", 1)
    leaf[stack.split(";")[-1]] = leaf.get(stack.split(";")[-1], 0) + int(n)
    total += int(n)
rows = {}
for r in j["symbols"]:
    if r["symbol"]:
        rows[r["symbol"]] = rows.get(r["symbol"], 0) + r["samples"]
top = sorted(rows, key=rows.get, reverse=True)[:5]
bad = [(t, rows[t], leaf.get(t)) for t in top if leaf.get(t) != rows[t]]
print("RESULT folded: %d samples; top-5 leaf widths == report -l: %s" % (total, not bad))
if bad and dropped == 0:
    fails.append("folded widths differ from the report: %r" % bad)
# pprof -traces: stacks of several frames
# a trace: label lines ("   guest:  guest"), then one line a frame
depth = [sum(1 for l in b.splitlines()[1:] if l.strip() and not re.match(r"^\s+\w+:  ", l))
         for b in open(traces).read().split("-----------+")[1:]]
deep = sum(1 for d in depth if d >= 4)
print("RESULT pprof -traces: %d traces, %d of 4+ frames" % (len(depth), deep))
if deep < 10:
    fails.append("pprof -traces shows %d deep stacks" % deep)
h = open(html).read()
if "do_syscall_64" not in h or "each call chain" not in h:
    fails.append("the flame graph has no call chains")
c = open(cg).read()
m = re.search(r"^\s+\d+\s+[\d.]+% vmlinux\s+do_syscall_64$", c, re.M)
if "callers above each function" not in c or not m:
    fails.append("report --callgraph shows no do_syscall_64 caller/callee line")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
# A session without -g: --callgraph says what to do.
"$OPVM" run --workload true -F 100 -d "$T/n" > /dev/null 2>&1 || fail "opvm run (no -g)"
if "$OPVM" report -d "$T/n" --callgraph > "$T/n.txt" 2>&1; then
	fail "report --callgraph on a session without -g succeeded"
fi
grep -q "record with -g" "$T/n.txt" || { cat "$T/n.txt"; fail "no hint to record with -g"; }
echo "RESULT report --callgraph without -g: $(grep -o 'this session has no call chains.*' "$T/n.txt" | head -c 70)"
exit 0
