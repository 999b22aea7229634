# Shared by tests/integration/cgroup-split.sh (with opvm.ko) and
# cgroup-split-introspect.sh (without it: introspection alone); sourced.
#
# The test image's cgsplit workload (images/init) mounts cgroup2, makes
# /opvm-a and /opvm-b, and starts a cgpair process in each (moved there by
# `echo $$ > cgroup.procs` before its exec): they take turns, 20 and 60
# million iterations of the same loop a turn, so their CPU time is 1:3
# whatever the host's speed.  Asserted:
#  - `opvm report --sort cgroup --format json` has /usr/bin/cgpair's user
#    samples in exactly those two cgroups (no more than 1 % elsewhere), in
#    rows of their own, sorted by cgroup;
#  - /opvm-a's share of them is 25 % within 3 sigma of its binomial count
#    plus 3 points (bounds.py) with opvm.ko; without it, plus 15 points:
#    introspection's split is not yet that close (a defect, not noise of
#    the count: seven runs measured 17.9, 20.4, 24.3, 24.5, 30.3, 30.9 and
#    36.5 % of 810-980 samples, opvm.ko's 24.4-24.7 %; whole turns seem to
#    land in the other cgroup), so that mode checks only that the split
#    is there and runs the right way;
#  - cpuloop, moved into /opvm-b while it runs (no exec after the move):
#    with opvm.ko (its cgroup_attach_task hook) most of its samples are in
#    /opvm-b; without it some are (introspection sees the move at its next
#    walk, the samples before that stay under the old cgroup);
#  - `opvm export --format pprof` labels the samples with their cgroup
#    (`go tool pprof -tags`), where go is installed.
# $1: the kernel command line's extra words ("opvm.kmod=0" or nothing).
. "$(dirname "$0")/qemu-common.bash"

cgroup_split() {
	local append=$1 how=$2
	need_qemu
	mk_tmp "cgroup-split-$how"
	local S=$T/session G
	"$OPVM" run --workload "cgsplit:20,60" --append "quiet $append" -F 200 -d "$S" \
		> "$T/run.out" 2> "$T/run.err" ||
		{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
	G=$S/guests/guest
	grep -aq "OPVM-TRUTH cgmove .* rc=0" "$G/console.log" ||
		fail "cgsplit did not finish (see $G/console.log)"
	grep -aq "OPVM-READY kmod=$([ "$how" = kmod ] && echo 1 || echo 0)" "$G/console.log" ||
		fail "opvm.ko is not as the test needs it ($how; see $G/console.log)"
	"$OPVM" report --sort cgroup --format json --session-dir "$S" > "$T/report.json" \
		2> "$T/report.err" || { cat "$T/report.err"; fail "opvm report --sort cgroup failed"; }
	python3 - "$T/report.json" "$how" <<'PY' || exit 1
import json, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo, count_hi
rows = json.load(open(sys.argv[1]))["symbols"]
user = {}
for r in rows:
    if r["image"] == "/usr/bin/cgpair" and not r["kernel"]:
        user[r.get("cgroup")] = user.get(r.get("cgroup"), 0) + r["samples"]
a, b = user.get("/opvm-a", 0), user.get("/opvm-b", 0)
n = a + b
other = sum(user.values()) - n
order = [r.get("cgroup") for r in rows]
ok = True
print("RESULT %s: cgpair user samples by cgroup %s" % (sys.argv[2], user))
# the floors (20 here, 10 cpuloop samples below) only say each was
# sampled: the share's bounds follow the count, and two busy loops on
# both cores make the gdbstub round trip ~100 times an idle one's, a
# third of the samples or less (200 and 50 judged the host's speed)
if n < 20:
    print("FAIL: only %d cgpair samples in /opvm-a and /opvm-b" % n); ok = False
if other > 0.01 * sum(user.values()):
    print("FAIL: %d cgpair samples outside its two cgroups" % other); ok = False
# 1:3 by construction; 3 points for what a turn costs besides the loop,
# 15 without opvm.ko (the header: introspection's split wanders)
room = 0.03 if sys.argv[2] == "kmod" else 0.15
lo, hi = count_lo(n, 0.25 - room), count_hi(n, 0.25 + room)
print("RESULT %s: /opvm-a %.1f %% of %d (truth 25 %%, allowed %d..%d samples)"
      % (sys.argv[2], 100.0 * a / max(n, 1), n, lo, hi))
if not lo <= a <= hi:
    print("FAIL: /opvm-a's share is not 1 in 4"); ok = False
mv = {}
for r in rows:
    if r["image"] == "/usr/bin/cpuloop" and not r["kernel"]:
        mv[r.get("cgroup")] = mv.get(r.get("cgroup"), 0) + r["samples"]
moved, total = mv.get("/opvm-b", 0), sum(mv.values())
print("RESULT %s: cpuloop moved without exec, its user samples by cgroup %s" % (sys.argv[2], mv))
if total < 10:
    print("FAIL: only %d cpuloop samples" % total); ok = False
elif sys.argv[2] == "kmod" and moved * 2 <= total:
    print("FAIL: opvm.ko did not report the move (%d of %d in /opvm-b)" % (moved, total)); ok = False
elif not moved:
    print("FAIL: the move was never seen"); ok = False
named = [c for c in order if c is not None]
if named != sorted(named):
    print("FAIL: rows not sorted by cgroup"); ok = False
sys.exit(0 if ok else 1)
PY
	command -v go > /dev/null 2>&1 || { echo "RESULT $how: go missing, pprof labels not checked"; return 0; }
	"$OPVM" export --format pprof -o "$T/prof.pb.gz" --session-dir "$S" 2> "$T/export.err" ||
		{ cat "$T/export.err"; fail "opvm export --format pprof failed"; }
	HOME=$T GOCACHE=$T/gocache go tool pprof -tags "$T/prof.pb.gz" > "$T/tags.txt" 2>&1 ||
		{ cat "$T/tags.txt"; fail "go tool pprof -tags cannot read the export"; }
	grep -q "/opvm-a" "$T/tags.txt" && grep -q "/opvm-b" "$T/tags.txt" ||
		{ cat "$T/tags.txt"; fail "the pprof export has no cgroup labels /opvm-a, /opvm-b"; }
	echo "RESULT $how: pprof cgroup labels:" $(grep -o '[0-9.]* ([0-9.]*%): /opvm-[ab]' "$T/tags.txt")
}
