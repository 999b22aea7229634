#!/bin/bash
# Faults during `opvm run`:
#  1. QEMU is killed (SIGKILL) while the workload runs: opvm exits non-zero
#     with a message naming the signal, the samples stay, report reads them.
#  2. The guest is reset (monitor system_reset) as its workload starts: it
#     boots again, its module sends a new HELLO, and the workload of the
#     second boot is filed under its process name.
#  3. The guest runs without opvm.ko: still profiled, per address space,
#     and the summary says so once (kernel symbols then need the guest's
#     kallsyms: the KASLR offset comes from the module).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-faults

wait_exit() {	# wait_exit PID SECONDS: its exit status, or stop it and fail
	for _ in $(seq $(( $2 * 5 ))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$1" 2>/dev/null; then
		kill -INT "$1"
		wait "$1"
		return 124
	fi
	wait "$1"
}

wait_console() {	# wait_console FILE PATTERN SECONDS
	for _ in $(seq $(( $3 * 5 ))); do
		grep -aq "$2" "$1" 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# ---- 1: QEMU killed ------------------------------------------------------------
"$OPVM" run --workload abratio --append "quiet opvm.args=60" -d "$T/kill" \
	> "$T/kill.out" 2>&1 &
opid=$!
CLEAN_PIDS="$opid"
wait_console "$T/kill/guests/guest/console.log" "OPVM-TRUTH abratio share" 150 ||
	fail "the guest did not start its workload"
sleep 3
qpid=$(pgrep -P "$opid" -f qemu-system-x86_64)
[ -n "$qpid" ] || fail "cannot find opvm's QEMU"
kill -KILL "$qpid"
wait_exit "$opid" 60
rc=$?
CLEAN_PIDS=""
cat "$T/kill.out"
[ $rc != 0 ] || fail "opvm run exited 0 after QEMU was killed"
grep -q "QEMU was killed by signal 9" "$T/kill.out" || fail "no clear message about the killed QEMU"
report_json "$T/kill" > "$T/kill.json" || fail "opvm report cannot read the session of a killed QEMU"
python3 - "$T/kill.json" <<'EOF' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
ab = sum(r["samples"] for r in d["symbols"] if r["app"].endswith("/abratio"))
print("RESULT QEMU killed mid-session: opvm failed cleanly, %d samples kept, %d of abratio"
      % (d["total_samples"], ab))
# (5: the claim is that they are kept; a busy host's gdbstub round trip,
# ~100 times an idle one's, takes a third of the samples or less)
if ab < 5:
    print("FAIL: the samples taken before the kill are not there"); sys.exit(1)
EOF

# ---- 2: guest reset ------------------------------------------------------------
"$OPVM" run --workload abratio --append "quiet opvm.args=4" -d "$T/reset" \
	-- -monitor "unix:$T/mon,server=on,wait=off" > "$T/reset.out" 2>&1 &
opid=$!
CLEAN_PIDS="$opid"
con=$T/reset/guests/guest/console.log
wait_console "$con" "OPVM-READY" 150 || { cat "$T/reset.out"; fail "the guest did not boot"; }
# init prints OPVM-READY as it starts the relay, before the relay's HELLO
# has reached opvm: a reset sent then would leave one HELLO to count.  So
# the reset waits for the first HELLO in session.json (written each sync).
python3 - "$T/reset/guests/guest/samples/current/session.json" "$opid" <<'EOF' ||
import json, os, sys, time
for _ in range(600):
    try:
        if json.load(open(sys.argv[1]))["model"]["hellos"] >= 1:
            sys.exit(0)
    except (OSError, ValueError, KeyError):
        pass
    try:
        os.kill(int(sys.argv[2]), 0)
    except OSError:
        break
    time.sleep(0.1)
sys.exit(1)
EOF
	{ cat "$T/reset.out"; fail "no HELLO from the guest's first boot in session.json"; }
python3 - "$T/mon" <<'EOF' || fail "cannot reset the guest through its monitor"
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"system_reset\n")
time.sleep(0.5)
s.close()
EOF
wait_exit "$opid" 180
rc=$?
CLEAN_PIDS=""
cat "$T/reset.out"
[ $rc = 124 ] && { tail -n 20 "$con"; fail "the guest did not power off after its reset (console above)"; }
[ $rc = 0 ] || fail "opvm run exited with $rc across a guest reset"
n_ready=$(grep -ac "OPVM-READY" "$con")
[ "$n_ready" -ge 2 ] || fail "the guest did not boot twice (console: $n_ready OPVM-READY)"
grep -q "2 HELLOs" "$T/reset.out" || fail "the summary does not report the second HELLO"
report_json "$T/reset" > "$T/reset.json" || fail "opvm report failed"
python3 - "$T/reset.json" <<'EOF' || exit 1
import json, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo
d = json.load(open(sys.argv[1]))
ab = [r for r in d["symbols"] if not r["kernel"] and r["app"].endswith("/abratio")]
tot = sum(r["samples"] for r in ab)
fb = sum(r["samples"] for r in ab if r["symbol"] == "func_b")
# from what the run sampled: abratio half the user samples at least
user = sum(r["samples"] for r in d["symbols"] if not r["kernel"])
print("RESULT guest reset mid-session: %d abratio user samples of %d after the new HELLO (at "
      "least %.0f expected), func_b %.1f %%" % (tot, user, count_lo(user, 0.4),
                                                 100.0 * fb / max(tot, 1)))
if not tot or tot < count_lo(user, 0.4) or fb < count_lo(tot, 0.9):
    print("FAIL: the second boot's workload is not filed by name"); sys.exit(1)
EOF

# ---- 3: no guest module ---------------------------------------------------------
# (--introspect off: the baseline, nothing reads the guest's memory for it)
timeout -s INT 180 "$OPVM" run --workload abratio --append "quiet opvm.kmod=0 opvm.args=3" --introspect off \
	-d "$T/nokmod" > "$T/nokmod.out" 2>&1 || { cat "$T/nokmod.out"; fail "opvm run without opvm.ko failed"; }
cat "$T/nokmod.out"
[ "$(grep -c "never said HELLO" "$T/nokmod.out")" = 1 ] ||
	fail "the summary does not say once that the guest module never spoke"
report_json "$T/nokmod" > "$T/nokmod.json" || fail "opvm report failed"
python3 - "$T/nokmod.json" <<'EOF2' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["symbols"]
k = [r for r in rows if r["kernel"]]
kt = sum(r["samples"] for r in k)
kn = sum(r["samples"] for r in k if r["symbol"])
u = [r for r in rows if not r["kernel"]]
ut = sum(r["samples"] for r in u)
anon = sum(r["samples"] for r in u if r["app"].startswith("{anon-cr3:"))
print("RESULT no opvm.ko: %d kernel samples (%.1f %% named by System.map), %d user samples, "
      "%d of them per address space ({anon-cr3:...})" % (kt, 100.0 * kn / max(kt, 1), ut, anon))
if kt == 0 or ut == 0 or anon < 0.9 * ut:
    print("FAIL"); sys.exit(1)
EOF2
echo PASS
