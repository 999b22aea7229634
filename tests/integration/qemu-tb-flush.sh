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

ctl() {	# ctl COMMAND [HMP]: one QMP command on the test's own monitor
	python3 - "$T/ctl" "$@" <<'PY'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
f.readline()
def run(cmd, args=None):
    m = {"execute": cmd}
    if args:
        m["arguments"] = args
    f.write(json.dumps(m) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            return r
run("qmp_capabilities")
if len(sys.argv) > 3:
    print(run("human-monitor-command", {"command-line": sys.argv[3]}).get("return", ""))
else:
    print(json.dumps(run(sys.argv[2]).get("return", {})))
PY
}
flushes() {	# QEMU's "TB flush count"
	ctl x "info jit" | tr -d '\r' | sed -n 's/^TB flush count *//p'
}

before=$(flushes)
[ -n "$before" ] || fail "no TB flush count in 'info jit'"
OPVM_TEST_TB_FLUSH=2 "$OPVM" attach --qmp "$T/qmp" --name vm --duration 8 -d "$T/s" \
	> "$T/attach.out" 2>&1 || { cat "$T/attach.out"; fail "opvm attach failed"; }
cat "$T/attach.out"
after=$(flushes)
echo "TB flush count: $before before, $after after"
[ "$after" -gt "$before" ] || fail "QEMU's translated code was not dropped"
grep -q "QEMU's translated code dropped 1 time" "$T/attach.out" ||
	fail "the drop is not in the summary"
# 2 s at 50 Hz on 2 vCPUs is at most 200 samples: more went on after it
n=$(sed -n 's/.*samples: \([0-9]*\) in files.*/\1/p' "$T/attach.out" | head -1)
[ "${n:-0}" -gt 250 ] || fail "too few samples ($n): sampling stopped after the drop?"
sleep 0.5
st=$(ctl query-status)
echo "$st" | grep -q '"running": true' || fail "the guest does not run after opvm detached: $st"
echo PASS
