#!/bin/bash
# Python functions by their own names (docs/runtimes.md) on the Debian disk
# guest: its own python3.11 runs a script of three pure-Python functions
# doing identical work in the proportion 10/30/60 (f10, f30, f60, called
# from main() from <module>), while `opvm attach --qmp` samples the guest
# through the gdbstub, once with opvm.ko and its channel, once without
# (module_blacklist=opvm systemd.mask=opvm-relay.service: the thread then
# comes from introspection's current task), each boot two sessions:
#   cg      -g dwarf: the Python frames read in the stop, the stacks
#   flat    no -g: the leaf Python frame read right after the stop
#           (validated against a second read)
# Asserts on each session: the summary says the interpreter was found;
# >= 95 % of python3.11's user samples are filed under a Python frame
# (report -l's rows with "python"), less what ran no Python (start-up,
# exit: count-aware); f10/f30/f60 hold 10/30/60 % of those three's samples
# within 2 pp, widened to 3 sigma of the binomial for few samples
# (tests/integration/bounds.py); with -g, >= 90 % of the stacks whose leaf
# Python function is one of them reach <module> through main, in that
# order, and no stack has an eval-loop frame (_PyEval_EvalFrameDefault)
# left between Python frames.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
mk_tmp disk-guest-python
T=$(cd "$T" && pwd)
SECS=${PYTHON_SECS:-40}
QPID=
kill_guest() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
	QPID=
}
CLEANUP_HOOK=kill_guest
export DEBUGINFOD_URLS=

cat > "$T/split.py" <<'PY'
import sys, time

def f10(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def f30(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def f60(n):
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s

def main(end):
    while time.time() < end:
        f10(20000)
        for _ in range(3):
            f30(20000)
        for _ in range(6):
            f60(20000)

main(time.time() + float(sys.argv[1]))
PY

# boot NAME APPEND: the disk guest with the opvm channel on $T/NAME.chan
boot() {
	local name=$1 append=$2
	CON=$T/$name.con
	qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nodefaults -display none -no-reboot \
		-kernel "$DISK/vmlinuz" -initrd "$DISK/initrd.img" -append "$DISK_CMDLINE $append" \
		-drive "file=$DISK/disk.img,if=virtio,format=raw,snapshot=on" \
		-device virtio-serial-pci \
		-chardev "socket,id=ch0,path=$T/$name.chan,server=on,wait=off" \
		-device virtserialport,chardev=ch0,name=org.opvm.0 \
		-chardev "socket,id=con,path=$CON,server=on,wait=off,logfile=$T/$name.console.log" \
		-serial chardev:con -qmp "unix:$T/$name.qmp,server=on,wait=off" > "$T/$name.qemu" 2>&1 &
	QPID=$!
	wait_shell 900 || { tail -30 "$T/$name.console.log"; fail "no root shell on the disk guest ($name)"; }
}

# session BOOT NAME ARGS...: the script running, one attach of $SECS s
session() {
	local b=$1 name=$2
	shift 2
	gsh 60 "echo $(base64 -w0 "$T/split.py") | base64 -d > /tmp/split.py && { setsid python3 /tmp/split.py $((SECS + 30)) > /dev/null 2>&1 < /dev/null & } && echo started" |
		grep -q started || fail "the script did not start ($b)"
	sleep 5
	gsh 60 "pgrep -f /tmp/split.py > /dev/null && echo running" | grep -q running ||
		fail "the script does not run ($b)"
	"$OPVM" attach --qmp "$T/$b.qmp" "$@" --name guest --duration "$SECS" -F 50 \
		-d "$T/$name" > "$T/$name.out" 2>&1 || { cat "$T/$name.out"; fail "opvm attach ($name)"; }
	grep -A4 "python: " "$T/$name.out"
	"$OPVM" report -l --format json --no-host-kernel -d "$T/$name" > "$T/$name.json" \
		2> "$T/$name.err" || { cat "$T/$name.err"; fail "opvm report ($name)"; }
	gsh 60 "pkill -f /tmp/split.py; echo done" > /dev/null
	sleep 2
}

# check NAME CG: the assertions on one session's report (its status)
check() {
	python3 - "$1" "$2" "$T/$1.json" "$T/$1.out" "$(dirname "$0")" <<'EOF'
import json, re, sys
sys.path.insert(0, sys.argv[5])
from bounds import shares_agree, allowed_misses
name, cg, rep, out = sys.argv[1], sys.argv[2] == "1", json.load(open(sys.argv[3])), \
    open(sys.argv[4]).read()
text = " ".join(out.split())
m = re.search(r"python: (\d+) of (\d+) samples in CPython processes read Python frames "
              r"\((\d+) frames; thread not known (\d+), no thread state (\d+), idle (\d+), "
              r"unreadable (\d+), refused (\d+):.*?interpreters found (\d+), not (\d+)", text)
if not m:
    print("FAIL: no python line in the summary (%s)" % name); sys.exit(1)
got, n, frames, no_tid, no_ts, idle, unread, refused, found, not_found = map(int, m.groups())
if found < 1 or not_found:
    print("FAIL: the interpreter was not found"); sys.exit(1)
# the interpreter's rows: its app is its executable, or without opvm.ko
# its name (comm) when introspection did not name the executable
ours = lambda app: app.endswith("python3.11") or app == "python3"
rows = [r for r in rep["symbols"] if not r["kernel"] and ours(r["app"])]
user = sum(r["samples"] for r in rows)
py = [r for r in rows if r.get("python")]
npy = sum(r["samples"] for r in py)
by = {}
for r in py:
    fn = r["symbol"].split(" ")[0]
    by[fn] = by.get(fn, 0) + r["samples"]
three = sum(by.get(f, 0) for f in ("f10", "f30", "f60"))
# what ran no Python or read no page is not a miss: the summary counts it
excused = idle + unread
print("RESULT disk-guest-python %s: %d of %d user samples of python3.11 under a Python "
      "frame (%.1f %%; %d idle or unreadable), f10/f30/f60 %d/%d/%d of %d" % (
      name, npy, user, 100.0 * npy / max(user, 1), excused, by.get("f10", 0),
      by.get("f30", 0), by.get("f60", 0), three))
if user < 50 or three < 50:
    for r in sorted(rep["symbols"], key=lambda r: -r["samples"])[:8]:
        print("  row: %d %s %s %s %s" % (r["samples"], r["app"], r["image"], r["kernel"],
                                          r["symbol"]))
    print("FAIL: too few samples (%d user, %d in the three)" % (user, three)); sys.exit(1)
ok = True
if user - npy > excused + allowed_misses(user, 0.05):
    print("FAIL: fewer than 95 %% under a Python frame (%d of %d)" % (npy, user)); ok = False
for f, p in (("f10", 0.1), ("f30", 0.3), ("f60", 0.6)):
    good, d, t = shares_agree(by.get(f, 0), three, int(p * 10**6), 10**6, 2.0)
    print("  %s: %.1f %% (expected %.0f %%, %+.1f pp, tolerance %.1f pp)" % (
          f, 100.0 * by.get(f, 0) / three, 100 * p, d, t))
    ok = ok and good
if cg:
    st = [s for s in rep.get("stacks", []) if ours(s["app"])]
    leafpy = reach = evals = 0
    for s in st:
        names = [f["symbol"] or "" for f in s["frames"]]
        pyn = [x.split(" ")[0] for f, x in zip(s["frames"], names) if f.get("python")]
        if not pyn or pyn[0] not in ("f10", "f30", "f60"):
            continue
        leafpy += s["samples"]
        if pyn[1:3] == ["main", "<module>"]:
            reach += s["samples"]
        first = next(i for i, f in enumerate(s["frames"]) if f.get("python"))
        last = max(i for i, f in enumerate(s["frames"]) if f.get("python"))
        if any(x.startswith("_PyEval_EvalFrame") for x in names[first:last + 1]):
            evals += s["samples"]
    print("RESULT disk-guest-python %s stacks: %d of %d reach <module> through main (%.1f %%), "
          "%d with an eval frame among the Python ones" % (name, reach, leafpy,
          100.0 * reach / max(leafpy, 1), evals))
    if leafpy < 50 or leafpy - reach > allowed_misses(leafpy, 0.10) or evals:
        print("FAIL: stacks"); ok = False
sys.exit(0 if ok else 1)
EOF
}

# PYTHON_BOOTS: which boots (default both)
BOOTS=${PYTHON_BOOTS:-module agentless}
checks=
case " $BOOTS " in *" module "*)
	boot module ""
	session module module-cg --channel "$T/module.chan" --call-graph dwarf
	session module module-flat --channel "$T/module.chan"
	kill_guest
	checks="module-cg:1 module-flat:0"
esac
case " $BOOTS " in *" agentless "*)
	boot agentless "module_blacklist=opvm systemd.mask=opvm-relay.service"
	session agentless agentless-cg --call-graph dwarf
	session agentless agentless-flat
	kill_guest
	checks="$checks agentless-cg:1 agentless-flat:0"
esac
fail_any=0
for s in $checks; do
	check "${s%:*}" "${s#*:}" || fail_any=1
done
[ $fail_any = 0 ] || fail "see above"
exit 0
