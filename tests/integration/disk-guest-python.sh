#!/bin/bash
# Python frames read from guest memory (docs/runtimes.md) on the Debian
# disk guest: its own python3.11 (`opvm-wl timed python`, pure-Python
# work), sampled through the gdbstub with -g, with opvm.ko and without it
# (module_blacklist=opvm systemd.mask=opvm-relay.service: the thread then
# comes from introspection's current task).  Checks, from the sampler's
# summary line: the interpreter was found, and at least 95 % of the user
# samples in python3.11 that ran a Python frame (not "idle": interpreter
# start-up and exit) on pages that read (not "unreadable": never touched)
# read a chain, at most 5 % refused.
# Not yet: the frames are counted, not filed, so the report's split by
# Python function is not checked here.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
mk_tmp disk-guest-python
img=$(realpath "$DISK/disk.img")

# one run; $1: its name, then opvm run's extra arguments
run_python() {
	local name=$1
	shift
	XDG_CACHE_HOME=$T/cache timeout 900 "$OPVM" run --disk "$img" --workload timed-python \
		-F 50 -g -d "$T/$name" "$@" > "$T/$name.out" 2>&1 ||
		{ cat "$T/$name.out"; fail "opvm run --disk ($name) failed"; }
	grep -a -q "OPVM-TIMED python" "$T/$name/guests/guest/console.log" ||
		fail "the workload did not run ($name)"
	grep -A4 "python: " "$T/$name.out"
	python3 - "$name" "$T/$name.out" <<'EOF' || fail "Python frames ($name)"
import re, sys
name, out = sys.argv[1], open(sys.argv[2]).read()
text = " ".join(out.split())
m = re.search(r"python: (\d+) of (\d+) samples in CPython processes read Python frames "
              r"\((\d+) frames; thread not known (\d+), no thread state (\d+), idle (\d+), "
              r"unreadable (\d+), refused (\d+): runtime \d+, loops \d+, frames \d+, "
              r"code \d+, names \d+; interpreters found (\d+), not (\d+) \(\d+ tries "
              r"too early\); (\d+) B read\)", text)
if not m:
    print("FAIL: no python line in the summary (%s)" % name); sys.exit(1)
(got, n, frames, no_tid, no_ts, idle, unread, refused, found, not_found,
 nbytes) = map(int, m.groups())
# idle: no Python frame to read (start-up, exit); unreadable: a page the
# process never touched (frozen modules' objects in the binary's .data)
ran = n - idle - unread
print("RESULT disk-guest-python %s: %d of %d user samples in python3.11 with Python frames "
      "(%d of %d that ran Python on readable pages, %.1f %%), %.1f frames and %.0f guest "
      "bytes each, %d unreadable, %d refused, %d without a thread" % (name, got, n, got, ran,
      100.0 * got / max(ran, 1), frames / max(got, 1), nbytes / max(n, 1), unread, refused,
      no_tid + no_ts))
if found < 1 or not_found:
    print("FAIL: the interpreter was not found"); sys.exit(1)
if ran < 20:
    print("FAIL: too few samples in python3.11 (%d)" % ran); sys.exit(1)
# refused chains are dropped, never misnamed; a vCPU stopped in the
# middle of a frame push costs one (3.1 % without opvm.ko, 0.5 % with it)
if got < 0.95 * ran or refused > 0.05 * n:
    print("FAIL: below 95 %, or more than 5 % refused"); sys.exit(1)
EOF
}

run_python module
run_python agentless --append "module_blacklist=opvm systemd.mask=opvm-relay.service"
exit 0
