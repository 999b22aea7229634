#!/bin/bash
# The stale-int3 guard's action (vmm/guest/int3loop.h), forced once with
# OPVM_TEST_TB_FLUSH on a TCG guest opvm attaches to:
#  - QEMU drops its translated code ("info jit": TB flush count goes up);
#  - the summary counts it;
#  - the guest keeps running and sampling goes on after it;
#  - the guest is not left paused when opvm detaches.
# The loop itself (a lost invalidation in QEMU's MTTCG) cannot be produced
# at will; tests/unit/test-int3loop.c checks the detector.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-tb-flush

qemu-system-x86_64 -accel tcg -m 384 -smp 2 -nodefaults -display none \
	-qmp "unix:$T/qmp,server=on,wait=off" -qmp "unix:$T/ctl,server=on,wait=off" \
	-serial "file:$T/console.log" \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.kmod=0 opvm.workload=abratio opvm.args=60" \
	> "$T/qemu.log" 2>&1 &
CLEAN_PIDS=$!
qpid=$!
wait_for "$T/console.log" "OPVM-TRUTH abratio share" "$qpid"
grep -aq "OPVM-TRUTH abratio share" "$T/console.log" || fail "the guest did not start its workload"

ctl() { qmp_ctl "$T/ctl" "$@"; }	# the test's own monitor
flushes() {	# QEMU's "TB flush count"
	ctl x "info jit" | tr -d '\r' | sed -n 's/^TB flush count *//p'
}

before=$(flushes)
[ -n "$before" ] || fail "no TB flush count in 'info jit'"
OPVM_TEST_TB_FLUSH=2 "$OPVM" attach --qmp "$T/qmp" --name vm --duration 11 --window 2 -d "$T/s" \
	> "$T/attach.out" 2>&1 || { cat "$T/attach.out"; fail "opvm attach failed"; }
cat "$T/attach.out"
after=$(flushes)
echo "TB flush count: $before before, $after after"
[ "$after" -gt "$before" ] || fail "QEMU's translated code was not dropped"
grep -q "QEMU's translated code dropped 1 time" "$T/attach.out" ||
	fail "the drop is not in the summary"
# Sampling goes on after the drop: every 2 s window after the one the
# drop fell in holds samples (a count of the windows, not of the host's
# speed: a loaded host takes fewer, never none for 2 s).
python3 - "$OPVM" "$T/s" <<'PY' || fail "sampling stopped after the drop"
import glob, json, os, subprocess, sys
opvm, s = sys.argv[1], sys.argv[2]
d = glob.glob(s + "/guests/*/samples")[0]
ws = sorted(n for n in os.listdir(d) if n.startswith("w-"))
def count(n):
    a, b = int(n[2:15]), int(n[16:29])
    r = subprocess.run([opvm, "report", "--format", "json", "-d", s, "--since",
                        "%d.%03d" % (a // 1000, a % 1000), "--until", "%d.%03d" % (b // 1000, b % 1000)],
                       capture_output=True, text=True)
    return json.loads(r.stdout)["total_samples"] if r.returncode == 0 else 0
c = [count(n) for n in ws]
print("RESULT samples per 2 s window: %s (the drop at 2 s, in the first two)" % c)
sys.exit(0 if len(c) >= 4 and all(c[2:]) else 1)
PY
sleep 0.5
st=$(ctl query-status)
echo "$st" | grep -q '"running": true' || fail "the guest does not run after opvm detached: $st"
echo PASS
