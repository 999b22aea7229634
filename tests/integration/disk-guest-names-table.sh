#!/bin/bash
# Names for real software, every source side by side, on one boot of the
# Debian disk guest built with libc6-dbg and python3.11-dbg installed
# (make images-disk DISK_DBG=1 BUILD=$BUILD/dbg, or OPVM_TEST_DISK_DBG=DIR),
# under TCG, busy with Debian's own stripped binaries on two vCPUs (perl,
# python3 with json, gzip, a seq | sort | md5sum pipeline).  Every report
# runs with the host's /usr/lib/debug hidden (a mount namespace); every
# fetch cache starts empty.
#
#  1. Booted with opvm.ko refused and its relay masked
#     (modprobe.blacklist=opvm systemd.mask=opvm-relay.service), a session
#     of `opvm attach --qmp`, no channel, no symbol flag: names from guest
#     memory only ("memory"), then the same session reported with
#     DEBUGINFOD_URLS at a real debuginfod on loopback serving the image's
#     own libc6-dbg and python3.11-dbg .debs ("debuginfod").
#  2. opvm.ko loaded and the relay started by hand in the same boot, a
#     session with the channel (-g) inside a window of `perf record -a -g`
#     in the guest: binaries and the guest's debug files sent by the relay
#     ("module + debug"); the same session with the fetched .debug files
#     taken away ("module": the binaries' .dynsym); eh_frame groups and
#     what stays unnamed; perf's own named share per binary.
#  3. If the debug files are not all in by then (libc's, ld.so's and
#     python3.11's: the relay paces them to 0.1 % of the time of a guest
#     busy on every vCPU, about 30 s a MB under TCG, and session 2's guest
#     is), the workloads stopped, a loop of short python3 runs left busy on
#     one vCPU (its samples fall in python3.11, libc and ld.so: a session
#     asks only for the debug files of the binaries it sampled) and more
#     sessions of 60 s on the same cache until they are in, as a user would
#     wait (the idle vCPU paces them faster); the test gives up only when
#     two sessions in a row brought no byte.  The reports of 2 are made
#     after.
#
# Prints the table per binary (RESULT lines) and asserts the bounds of
# disk-guest-names-table.py: perl (the binary) >= 95 % named from memory; libc and
# python3.11 >= 99 % with debuginfod and >= 99 % with the guest's debug
# files; memory at least the relay's .dynsym share less 1 pp (its PLT
# sections apart: opvm names them from section headers, which guest memory
# does not hold); opvm names
# at least as many samples as perf per binary; perf's top-10 user symbols
# within 2 pp, as shares of each side's user samples (perf moves time from
# user code into the kernel: disk-guest-names-table.py's vs_perf), count-
# aware tolerances (tests/integration/bounds.py).
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
DISK=${OPVM_TEST_DISK_DBG:-$BUILD/dbg/images-disk}
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
for t in debuginfod bsdtar debugfs; do
	command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps.sh)"
done
unshare -m true 2>/dev/null || skip "no mount namespace (unshare -m) to hide the host's /usr/lib/debug"
[ -f "$DISK/disk.img" ] ||
	skip "no disk guest with debug files in $DISK: make images-disk DISK_DBG=1 BUILD=$BUILD/dbg (or OPVM_TEST_DISK_DBG=DIR)"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
mk_tmp disk-guest-names-table
T=$(cd "$T" && pwd)
SECS=${NAMES_SECS:-40}
PERF_SECS=$((SECS + 15))
QPID=
kill_guest() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
	QPID=
}
CLEANUP_HOOK=kill_guest
export DEBUGINFOD_URLS=

# hidden CMD...: CMD with the host's /usr/lib/debug hidden
hidden() {
	unshare -m sh -c 'mkdir -p /usr/lib/debug && mount -t tmpfs none /usr/lib/debug && exec "$@"' x "$@"
}

# ---- a real debuginfod over the image's own -dbg packages -----------------
mkdir -p "$T/debs"
for p in libc6-dbg python3.11-dbg; do
	f=$(ls "$DISK"/debs/${p}_*.deb 2>/dev/null | head -1)
	[ -n "$f" ] || fail "no $p .deb in $DISK/debs (the image's debootstrap cache)"
	ln "$f" "$T/debs/" 2>/dev/null || cp "$f" "$T/debs/"
done
P=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
debuginfod -U -p "$P" -d "$T/db.sqlite" -t 0 -g 0 "$T/debs" > "$T/dbgd.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"

# the binaries' build-ids, from the image (read-only)
bid_of() {	# bid_of PATH
	debugfs -R "dump -p $1 $T/bin.$$" "$DISK/disk.img" > /dev/null 2>&1
	readelf -n "$T/bin.$$" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p'
	rm -f "$T/bin.$$"
}
LBID=$(bid_of /usr/lib/x86_64-linux-gnu/libc.so.6)
PBID=$(bid_of /usr/bin/python3.11)
DBID=$(bid_of /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
[ -n "$LBID" ] && [ -n "$PBID" ] && [ -n "$DBID" ] ||
	fail "no build-ids for libc.so.6 / python3.11 / ld-linux-x86-64.so.2 in $DISK/disk.img"

# ---- boot: no module, no relay ------------------------------------------------
CON=$T/con
qemu-system-x86_64 -accel tcg -m 1536 -smp 2 -nodefaults -display none -no-reboot \
	-kernel "$DISK/vmlinuz" -initrd "$DISK/initrd.img" \
	-append "$DISK_CMDLINE modprobe.blacklist=opvm systemd.mask=opvm-relay.service" \
	-drive "file=$DISK/disk.img,if=virtio,format=raw,snapshot=on" \
	-device virtio-serial-pci -chardev "socket,id=ch0,path=$T/ch,server=on,wait=off" \
	-device virtserialport,chardev=ch0,name=org.opvm.0 \
	-chardev "socket,id=con,path=$CON,server=on,wait=off,logfile=$T/console.log" \
	-serial chardev:con -qmp "unix:$T/qmp,server=on,wait=off" > "$T/qemu.out" 2>&1 &
QPID=$!
wait_shell 900 || { tail -30 "$T/console.log"; fail "no root shell on the disk guest's console"; }
gsh 60 'echo "kmod=$(grep -c "^opvm " /proc/modules) relay=$(systemctl is-active opvm-relay)"' |
	grep -q "kmod=0 relay=inactive" || fail "opvm.ko or its relay runs: part 1 needs neither"

# the workloads (as base64: one console line, no quoting to survive), in
# their own process group until killed; perl and python3 each leave a
# file in /tmp/wl.ready once past their start (python3's compiles and
# imports json: seconds under TCG, code of its own that session 1 would
# hold and session 2 not)
cat > "$T/wl.sh" <<'WL'
echo $$ > /tmp/wl.pid	# setsid's: the group's leader
e=$(( $(date +%s) + $1 ))
mkdir -p /tmp/wl.ready
perl -e 'my %h; my $i = 0; open(my $f, ">", "/tmp/wl.ready/perl"); close($f); while (time < $ARGV[0]) { $h{$i++ % 4096} = join(",", map { $_ * 3 } 1..16); }' "$e" &
python3 -c 'import json, sys, time
d = [{"k": i, "v": [i] * 8, "s": str(i)} for i in range(2000)]
json.loads(json.dumps(d)); open("/tmp/wl.ready/python3", "w").close()
while time.time() < float(sys.argv[1]): json.loads(json.dumps(d))' "$e" &
( while [ "$(date +%s)" -lt "$e" ]; do gzip -6 -c < /usr/bin/python3.11 > /dev/null; done ) &
( while [ "$(date +%s)" -lt "$e" ]; do seq 1 200000 | sort -r | md5sum > /dev/null; done ) &
wait
WL
# perf inside: OPVM-PERF-ENABLED once its counters are on, then one line
# of JSON (disk-guest-names-table.py's perf_summary, every binary's count)
cat > "$T/perf.sh" <<'PERF'
d=$(mktemp -d)
perf record -q -e cpu-clock -F 100 -a -g -o "$d/perf.data" \
	-- sh -c 'echo OPVM-PERF-ENABLED > /dev/console; exec sleep "$1"' sh "$1" > /dev/null 2>&1 ||
	{ echo "OPVM-PERF failed"; exit 1; }
echo "OPVM-PERF recorded"
perf script -i "$d/perf.data" -F comm,tid,period,ip,sym,dso 2>/dev/null | python3 /tmp/perf-summary.py
rm -rf "$d"
PERF
PY=$(dirname "$0")/disk-guest-names-table.py
python3 "$PY" perf-summary-source > "$T/perf-summary.py"
for f in wl.sh perf.sh perf-summary.py; do
	gsh 60 "echo $(base64 -w0 "$T/$f") | base64 -d > /tmp/$f && echo copied" | grep -q copied ||
		fail "could not copy $f into the guest"
done
gsh 60 "{ setsid bash /tmp/wl.sh 3600 > /dev/null 2>&1 < /dev/null & } ; echo started" |
	grep -q started || fail "the workloads did not start"
# the sessions sample the workloads at work, not starting
for _ in $(seq 120); do
	gsh 60 'echo "ready=$(ls /tmp/wl.ready 2>/dev/null | wc -l)"' | grep -q "ready=2" && break
	sleep 2
done
gsh 60 'echo "ready=$(ls /tmp/wl.ready 2>/dev/null | wc -l)"' | grep -q "ready=2" ||
	fail "perl and python3 did not get past their start in 240 s"
sleep 2

# ---- 1: no module -------------------------------------------------------------
DEBUGINFOD_URLS= hidden "$OPVM" attach --qmp "$T/qmp" --name disk --duration "$SECS" -F 100 \
	--fetch-cache "$T/c1" -d "$T/s1" > "$T/attach1.out" 2>&1 ||
	{ cat "$T/attach1.out"; fail "opvm attach (no module) failed"; }

# ---- 2: the module and its relay, perf inside ------------------------------------
gsh 120 'modprobe opvm && { setsid /usr/sbin/opvm-relay > /tmp/relay.log 2>&1 < /dev/null & } ; sleep 2; echo "kmod=$(grep -c "^opvm " /proc/modules) relay=$(pgrep -c -x opvm-relay)"' \
	> "$T/relay.out"
grep -q "kmod=1 relay=1" "$T/relay.out" || { cat "$T/relay.out"; fail "opvm.ko and the relay did not start by hand"; }
gsh 1800 "bash /tmp/perf.sh $PERF_SECS" > "$T/perf.out" &
gpid=$!
for _ in $(seq 1200); do
	grep -aq "OPVM-PERF-ENABLED" "$T/console.log" && break
	kill -0 "$gpid" 2>/dev/null || break
	sleep 0.1
done
grep -aq "OPVM-PERF-ENABLED" "$T/console.log" || { cat "$T/perf.out"; fail "perf in the guest did not start"; }
DEBUGINFOD_URLS= hidden "$OPVM" attach --qmp "$T/qmp" --channel "$T/ch" --name disk -g \
	--duration "$SECS" -F 100 --fetch-cache "$T/c2" -d "$T/s2" > "$T/attach2.out" 2>&1 ||
	{ cat "$T/attach2.out"; fail "opvm attach (module) failed"; }
kill -0 "$gpid" 2>/dev/null && ! grep -aq "OPVM-PERF recorded" "$T/console.log" ||
	fail "perf's $PERF_SECS s ended before opvm's $SECS s: the windows do not nest"
wait "$gpid" || { tail -20 "$T/perf.out"; fail "perf in the guest failed"; }
grep -a "^OPVM-PERF-JSON " "$T/perf.out" | tail -n 1 | cut -d' ' -f2- > "$T/perf.json"
[ -s "$T/perf.json" ] || { cat "$T/perf.out"; fail "no OPVM-PERF-JSON from the guest"; }

# ---- 3: the rest of the debug files, the guest less busy ------------------------
have_debug() {
	local b
	for b in "$LBID" "$PBID" "$DBID"; do
		[ -f "$T/c2/disk/${b:0:2}/${b:2}.debug" ] || return 1
	done
}
# fetch_of SESSION: its fetch.binaries figures (data_bytes: every FILE_DATA
# byte taken, a transfer the session's end cut short included)
fetch_of() {
	python3 -c 'import json, sys
b = json.load(open(sys.argv[1] + "/guests/disk/samples/current/session.json"))["fetch"]["binaries"]
print(b.get("data_bytes", 0), b.get("open", 0), json.dumps(b.get("debug_files", {})))' "$1"
}
echo "MEASURED session 2 (every vCPU busy, $SECS s): $(find "$T/c2" -name '*.debug' | wc -l) debug files in the cache; FILE_DATA bytes, open transfers, debug files: $(fetch_of "$T/s2")"
extra=0
idle=0
t3=$(date +%s)
if ! have_debug; then
	gsh 60 'kill -TERM -- -$(cat /tmp/wl.pid); { setsid bash -c "while :; do python3 -c \"import json; json.loads(json.dumps([dict(k=i) for i in range(20000)]))\"; done" > /dev/null 2>&1 < /dev/null & } ; echo one' | grep -q one ||
		fail "could not leave a python3 loop busy"
	while ! have_debug; do
		extra=$((extra + 1))
		DEBUGINFOD_URLS= hidden "$OPVM" attach --qmp "$T/qmp" --channel "$T/ch" --name disk \
			--duration 60 -F 20 --fetch-cache "$T/c2" -d "$T/s3-$extra" > "$T/attach3.out" 2>&1 ||
			{ cat "$T/attach3.out"; fail "opvm attach (debug files) failed"; }
		f=$(fetch_of "$T/s3-$extra")
		echo "session 3-$extra: FILE_DATA bytes, open transfers, debug files: $f"
		# progress, not time: two sessions in a row with no byte is a relay
		# that stopped sending (or a host that stopped asking)
		if [ "${f%% *}" = 0 ]; then idle=$((idle + 1)); else idle=0; fi
		[ $idle -lt 2 ] || have_debug ||
			fail "two sessions in a row brought no byte and the debug files are not all in: $(find "$T/c2" -name '*.debug')"
	done
fi
echo "MEASURED debug files: $(find "$T/c2" -name '*.debug' | wc -l) in the cache after the perf session and $extra more sessions of 60 s ($(( $(date +%s) - t3 )) s, one vCPU busy)"
gsh 60 'pkill -TERM -x opvm-relay; sleep 2; cat /tmp/relay.log' > "$T/relay-exit.out"
grep -a "^opvm-relay: \(used\|debug files\)" "$T/relay-exit.out" | sed 's/^/MEASURED /'
kill_guest

# ---- the reports ------------------------------------------------------------------
for _ in $(seq 240); do
	a=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/buildid/$LBID/debuginfo")
	b=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$P/buildid/$PBID/debuginfo")
	[ "$a$b" = 200200 ] && break
	sleep 0.5
done
[ "$a$b" = 200200 ] || { tail "$T/dbgd.log"; fail "debuginfod never served libc's and python3.11's debug files ($a $b)"; }
REPL=-l
rep() {	# rep OUT SESSION [VAR=VALUE...]: report ($REPL) as JSON, host's debug files hidden
	local out=$1 s=$2
	shift 2
	env DEBUGINFOD_URLS= "$@" unshare -m sh -c 'mkdir -p /usr/lib/debug && mount -t tmpfs none /usr/lib/debug && exec "$@"' x \
		"$OPVM" report $REPL --format json --no-host-kernel -d "$s" > "$T/$out.json" 2> "$T/$out.err" ||
		{ cat "$T/$out.err"; fail "opvm report $out"; }
}
rep mem "$T/s1"
rep dbgd "$T/s1" DEBUGINFOD_URLS="http://127.0.0.1:$P" DEBUGINFOD_CACHE_PATH="$T/dcache"
rep kdbg "$T/s2"
REPL= rep stacks "$T/s2"
find "$T/c2" -name '*.debug' > "$T/debugs"
while read -r f; do mv "$f" "$f.moved"; done < "$T/debugs"
rep kmod "$T/s2"
while read -r f; do mv "$f.moved" "$f"; done < "$T/debugs"

python3 "$PY" check "$T" || fail "see the FAIL lines above"
echo PASS
