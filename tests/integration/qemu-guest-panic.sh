#!/bin/bash
# A guest kernel that panics ends `opvm run` (a panicked kernel never powers
# off, so the run would wait for good): the test image booted with no init
# to run panics; opvm stops QEMU once the panic's end line is on the
# console, exits 1 with the panic's reason and where its report is, and
# keeps the samples taken until then (the session reports them).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-guest-panic

timeout 300 "$OPVM" run -d "$T/s" -F 50 --append "rdinit=/nonexistent init=/nonexistent" \
	> "$T/run.out" 2> "$T/run.err"
rc=$?
cat "$T/run.err"
[ $rc = 124 ] && fail "opvm run still waited for the panicked guest after 300 s"
[ $rc = 1 ] || fail "opvm run exited with $rc after a guest panic, not 1"
tr '\n' ' ' < "$T/run.err" | grep -Eq "the guest kernel panicked \(.+\); +its report is in +$T/s/guests/[^ ]+/console.log" ||
	fail "no panic error naming the reason and console.log"
grep -q -- "---\[ end Kernel panic" "$T"/s/guests/*/console.log ||
	fail "console.log does not hold the panic's report"
"$OPVM" report --session-dir "$T/s" > "$T/report.txt" 2>&1 ||
	{ cat "$T/report.txt"; fail "the samples taken before the panic do not report"; }
n=$(report_json "$T/s" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total_samples"])' 2>/dev/null)
[ "${n:-0}" -gt 0 ] || fail "no samples kept from before the panic"
echo "RESULT guest panic: opvm run exited 1 with its reason; $n samples kept"
