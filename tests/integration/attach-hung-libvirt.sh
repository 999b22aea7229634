#!/bin/bash
# opvm-test: alone (one libvirtd for the host's domains)
# A libvirtd that does not answer must not hang `opvm attach DOMAIN`
# (issue 25): its libvirt lookup (connect, the domain, its XML, query-kvm)
# runs in the libvirt reader's worker (virtstats_reader_run(), the mechanism top
# and the exporter use) with a 10 s budget.  The URI names a fake daemon's
# socket (tests/integration/fake-libvirtd.py): one that accepts and never
# answers (a hung libvirtd), one whose backlog is full (a connect() blocks).
# No real libvirtd is touched.  For each: attach ends within 20 s (the
# budget and a margin for a loaded machine), exit 1, with a message that
# says libvirt did not answer and how to go on without it (--qmp).
# Before: blocked in libvirt for ever (killed by timeout after 30 s).
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/local-hostile.bash"
need_local_hostile
mk_tmp attach-hung-libvirt
T=$(realpath "$T")
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }

for mode in silent full; do
	sock=$T/$mode.sock
	/usr/bin/python3 "$(dirname "$FAKE_QEMU")/fake-libvirtd.py" "$mode" "$sock" > "$sock.out" 2>&1 &
	CLEAN_PIDS="$CLEAN_PIDS $!"
	for _ in $(seq 100); do grep -q ready "$sock.out" 2>/dev/null && break; sleep 0.1; done
	grep -q ready "$sock.out" || fail "the fake libvirtd '$mode' did not start"
	start=$(date +%s%N)
	timeout -k 1 30 "$OPVM" attach -c "qemu+unix:///system?socket=$sock" some-domain \
		--duration 1 -d "$T/s-$mode" > "$T/$mode.log" 2>&1
	rc=$?
	took=$(( ($(date +%s%N) - start) / 1000000 ))
	echo "RESULT attach DOMAIN, libvirt $mode: exit $rc after $took ms (deadline 20 s)"
	sed 's/^/    /' "$T/$mode.log"
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		bad "attach was still waiting on the $mode libvirtd after 30 s"
		continue
	fi
	[ "$took" -lt 20000 ] || bad "attach took $took ms against the $mode libvirtd"
	[ "$rc" = 1 ] || bad "attach exited $rc against the $mode libvirtd (wanted 1)"
	msg=$(tr -s '\n ' '  ' < "$T/$mode.log")	# as one line: it is wrapped
	case "$msg" in *"did not answer within 10 s"*"--qmp SOCKET"*) ;; *)
		bad "attach does not say that libvirt did not answer and what to do" ;;
	esac
done
[ "$FAILED" = 0 ] || fail "$FAILED checks failed"
echo PASS
