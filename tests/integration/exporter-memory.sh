#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# The exporter's memory after bursts of QEMUs in /proc (issue 25): what
# /proc lists is any local user's to choose, and a long-running exporter
# must give back what one burst took.  `make soak` (30 min) saw its RSS grow
# 18,940 -> 20,523 kB (+8.4 %) in steps as other processes came and went;
# this is the short, count-based form of that check (no wall clock):
#  1. 60 scrapes to warm up beside a real QEMU; its anonymous memory (the
#     heap: smaps_rollup's Anonymous) is the base;
#  2. three times: a fake QEMU and 300 forked children
#     (tests/integration/fake-qemu.py, FAKE_QEMU_FORKS) for 10 scrapes
#     (each lists them all), then gone for 40 scrapes;
#  3. after the bursts the anonymous memory may exceed the base by at most
#     768 KiB, and the last burst's may not pass the first's by more than
#     256 KiB (no ratchet).  Before the fix: +1.2-1.6 MB after one burst.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
# ASan's allocator holds freed memory back (its quarantine) by design
grep -qa __asan_init "$OPVM" && skip "a SAN=address build: its heap figures are not glibc's"
mk_tmp exporter-memory
T=$(realpath "$T")
P=m$$
FORKS=300

start_real "$P-real" "$T/real.qmp"
PORT=$(free_port)
start_exporter "$T/exporter.log" --listen "127.0.0.1:$PORT" --no-libvirt --min-interval 0 ||
	fail "the exporter did not start"
anon() { awk '/^Anonymous:/ {print $2}' "/proc/$EXP_PID/smaps_rollup"; }
# scrape N [OUT]: N scrapes, each a new reading; the last kept in OUT
scrape() {
	local i
	for i in $(seq "$1"); do
		curl -s -m 10 -o "${2:-/dev/null}" "http://127.0.0.1:$PORT/metrics" ||
			fail "scrape $i failed"
	done
}
scrape 60
base=$(anon)
echo "after 60 scrapes: anonymous $base kB, RSS $(awk '/^VmRSS:/ {print $2}' "/proc/$EXP_PID/status") kB"
afters=""
for round in 1 2 3; do
	FAKE_QEMU_FORKS=$FORKS start_fake none "$P-burst$round" "$T/burst$round.qmp"
	bpid=$FAKE_PID
	scrape 10 "$T/m$round.txt"
	seen=$(grep -c "^opvm_guest_read_ok{guest=\"$P-burst$round" "$T/m$round.txt")
	during=$(anon)
	kill "$bpid"
	wait "$bpid" 2>/dev/null
	CLEAN_PIDS=${CLEAN_PIDS/ $bpid/}
	scrape 40
	after=$(anon)
	afters="$afters $after"
	echo "burst $round: $seen of $((FORKS + 1)) fake QEMUs listed," \
		"anonymous $during kB during, $after kB 40 scrapes after"
	[ "$seen" -ge "$FORKS" ] || fail "the exporter listed $seen of the $((FORKS + 1)) fake QEMUs"
done
read -r first _ last <<< "$afters"
echo "RESULT exporter memory: anonymous $base kB after warm-up, $first kB after one burst" \
	"of $((FORKS + 1)) QEMUs (+$((first - base)) kB), $last kB after three (+$((last - base)) kB)"
[ $((first - base)) -le 768 ] || fail "one burst left $((first - base)) kB (over 768 KiB)"
[ $((last - base)) -le 768 ] || fail "three bursts left $((last - base)) kB (over 768 KiB)"
[ $((last - first)) -le 256 ] || fail "the memory grew $((last - first)) kB from the first burst to the third"
echo PASS
