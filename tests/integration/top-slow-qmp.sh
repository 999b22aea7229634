#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# A QMP socket that answers every message just within a per-call deadline
# must cost its guest one budget per refresh, not one per call (issue 25):
# each guest's whole QMP exchange in a refresh (connect, greeting,
# qmp_capabilities, its queries) has one deadline (hs_config.qmp_timeout_ms,
# 1 s).  Beside a real QEMU (TCG, idle) and a fake one that answers at once,
# three fakes (tests/integration/fake-qemu.py slow) send each message 0.9 s
# after its cause.
#  1. `opvm top --once --format json` lists the real and the answering guest
#     read in full, the slow ones marked read_ok: false (did not answer);
#  2. count-based: each slow fake saw at most qmp_capabilities on a
#     connection, never a query (the greeting at 0.9 s and the capabilities'
#     reply at 1.8 s leave no time in one 1 s budget; per-call deadlines
#     would let greeting, capabilities and query-cpus-fast through, 2.7 s
#     each), and found the client gone when it replied;
#  3. top --once ends within 12 s (1 s of --delay, at most 1 s per slow
#     guest, the rest margin for a loaded machine);
#  4. `opvm exporter` answers 8 scrapes within 2 s each, with the real guest
#     read (opvm_guest_read_ok 1).
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
mk_tmp top-slow-qmp
T=$(realpath "$T")
P=s$$
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

start_real "$P-real" "$T/real.qmp"
start_fake answer "$P-answer" "$T/answer.qmp"
for i in 1 2 3; do
	start_fake slow "$P-slow$i" "$T/slow$i.qmp"
done

# ---- 1-3: top --once -----------------------------------------------------------
once_beside "3 slow QMP sockets" 12 "real answer" "slow1 slow2 slow3"
for i in 1 2 3; do
	log=$T/slow$i.qmp.out
	echo "slow$i: $(grep -c '^got' "$log") commands ($(grep '^got' "$log" | sort | uniq -c | tr -s ' \n' '  ')), $(grep -c '^gone' "$log") replies to a client gone"
	grep -q '^got query' "$log" && bad "slow guest $i was sent a query after its budget was spent"
	grep -q '^gone' "$log" || bad "slow guest $i: no reply found its client gone"
done

# ---- 4: the exporter ---------------------------------------------------------
PORT=$(free_port)
start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" --no-libvirt --min-interval 0 ||
	bad "the exporter did not start"
scrapes_within "3 slow QMP sockets" "$PORT" 8
grep -q "^opvm_guest_read_ok{guest=\"$P-real\"} 1" "$T/m8.txt" 2>/dev/null ||
	bad "the exporter does not list the real guest as read"
grep -q "^opvm_guest_read_ok{guest=\"$P-slow1\"} 0" "$T/m8.txt" 2>/dev/null ||
	bad "the exporter does not mark the slow guest (opvm_guest_read_ok 0)"
kill "$EXP_PID"
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
