#!/bin/bash
# opvm channel-dump against hostile and well-formed channel streams: files,
# stdin, a unix socket (as QEMU's chardev exposes it), --count, --raw-out,
# --json, --stats, escaping of guest strings, and a 100 MB random flood whose
# peak RSS is measured.  Streams come from tests/fuzz/gen-decoder-seeds.py.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
cd "$(dirname "$0")/../.." || exit 1

if [ ! -x "$OPVM" ]; then
	echo "SKIP: $OPVM not built (run make)"
	exit 77
fi
if ! command -v python3 >/dev/null; then
	echo "SKIP: python3 is needed to write the test streams"
	exit 77
fi

tmp=$(mktemp -d "${BUILD}/tmp/decoder-hostile.XXXXXX" 2>/dev/null ||
	{ mkdir -p "$BUILD/tmp" && mktemp -d "$BUILD/tmp/decoder-hostile.XXXXXX"; })
srv_pid=""
cleanup() {
	[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

fail=0
check() {	# check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then
		echo "ok    $what"
	else
		echo "FAIL  $what"
		fail=1
	fi
}

python3 tests/fuzz/gen-decoder-seeds.py --streams "$tmp/s" || exit 1

# -- a well-formed session, from a file --------------------------------------
"$OPVM" channel-dump "$tmp/s/session" >"$tmp/session.out" 2>"$tmp/session.err"
check "session: exit 0" [ $? = 0 ]
check "session: 18 records printed" [ "$(wc -l <"$tmp/session.out")" = 18 ]
check "session: HELLO line" grep -qx '#0 HELLO version=1 cpus=2 slot_pa=0x2a45000 release="6.1.0-56-amd64" anchor=printk@0xffffffff8a0d3a80 slot_size=24 text=0xffffffff89000000' "$tmp/session.out"
check "session: PROC line" grep -qx '#1 PROC tgid=1 ppid=0 cr3=0x1a2b000 exe=0x7 comm="init"' "$tmp/session.out"
check "session: COOKIE line" grep -qx '#3 COOKIE id=0x3 build_id=bebdbcbbbab9b8b7b6b5b4b3b2b1b0afaeadacab path="/lib/x86_64-linux-gnu/libc.so.6"' "$tmp/session.out"
check "session: MMAP line" grep -qx '#5 MMAP tgid=1 start=0x7f1234560000 end=0x7f12346e0000 pgoff=0x28000 cookie=0x3 prot=r-x' "$tmp/session.out"
check "session: MODULE line" grep -qx '#8 MODULE name="virtio_console" base=0xffffffffc0200000 size=0x6000' "$tmp/session.out"
check "session: PROC_EXIT line" grep -qx '#17 PROC_EXIT tgid=42' "$tmp/session.out"
check "session: summary on stderr" grep -q '18 records, 0 bad, 0 resyncs' "$tmp/session.err"

# -- stdin, --stats, --count ---------------------------------------------------
"$OPVM" channel-dump --stats - <"$tmp/s/session" >"$tmp/stdin.out" 2>/dev/null
check "stdin: same records" cmp -s <(head -18 "$tmp/stdin.out") "$tmp/session.out"
check "--stats on stdout" grep -q '^STATS bytes=1152 records=18 bad_records=0 skipped_bytes=0 resyncs=0 seq_gaps=0 ' "$tmp/stdin.out"
"$OPVM" channel-dump --count 5 "$tmp/s/session" >"$tmp/count.out" 2>/dev/null
check "--count 5 prints 5" [ "$(wc -l <"$tmp/count.out")" = 5 ]
"$OPVM" channel-dump --count x "$tmp/s/session" >/dev/null 2>&1
check "--count x is a usage error" [ $? = 2 ]
"$OPVM" channel-dump "$tmp/nonexistent" >/dev/null 2>"$tmp/nx.err"
check "missing input: exit 1 with advice" [ $? = 1 ]
tr '\n' ' ' < "$tmp/nx.err" | tr -s ' ' > "$tmp/nx.line"	# messages wrap at 80 columns
check "missing input: says what to give" grep -q 'unix socket' "$tmp/nx.line"

# -- hostile stream: garbage, unknown type, bad cookie, foreign version, gap ---
"$OPVM" channel-dump --stats "$tmp/s/hostile" >"$tmp/hostile.out" 2>/dev/null
check "hostile: resync counted" grep -q ' resyncs=1 ' "$tmp/hostile.out"
check "hostile: 17 garbage bytes skipped" grep -q ' skipped_bytes=17 ' "$tmp/hostile.out"
check "hostile: bad cookie counted" grep -q ' bad_records=1 ' "$tmp/hostile.out"
check "hostile: unknown type counted" grep -q ' unknown_types=1 ' "$tmp/hostile.out"
check "hostile: version mismatch counted" grep -q ' version_mismatch=1 ignored=1 ' "$tmp/hostile.out"
check "hostile: seq gap counted" grep -q ' seq_gaps=3 ' "$tmp/hostile.out"
check "hostile: foreign HELLO not printed" [ "$(grep -c HELLO "$tmp/hostile.out")" = 2 ]
check "hostile: record after everything decoded" grep -qx '#4 PROC tgid=7 ppid=1 cr3=0x7000 exe=0x0 comm="gap"' "$tmp/hostile.out"

# -- hostile strings never reach the terminal raw ------------------------------
"$OPVM" channel-dump "$tmp/s/strings" >"$tmp/strings.out" 2>/dev/null
check "strings: no control bytes in output" \
	python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); sys.exit(any(b<0x20 and b!=10 or b>=0x7f for b in d))' "$tmp/strings.out"
check "strings: escapes shown" grep -qF 'comm="\x1b]0;pwned\x07\x0a\x0d\"\\\xff"' "$tmp/strings.out"
check "strings: path escaped" grep -qF 'path="../../../etc/shadow\x0a\x1b[2J\x7f\"quoted\""' "$tmp/strings.out"
check "strings: 4 lines" [ "$(wc -l <"$tmp/strings.out")" = 4 ]

# -- JSON ------------------------------------------------------------------------
"$OPVM" channel-dump --json --stats "$tmp/s/strings" >"$tmp/strings.json" 2>/dev/null
check "json: every line parses" python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]
assert len(objs) == 5, len(objs)
assert objs[1]["type"] == "PROC" and objs[1]["tgid"] == 8, objs[1]
assert objs[2]["path"].startswith("../../../etc/shadow\\x0a"), objs[2]
assert objs[4]["stats"]["records"] == 4, objs[4]
' "$tmp/strings.json"
"$OPVM" channel-dump --json "$tmp/s/order" >"$tmp/order.json" 2>/dev/null
check "json: u64 beyond 2^53 kept exact" grep -q '"count":"18446744073709551615"' "$tmp/order.json"

# -- a unix socket, as QEMU's chardev serves it; --raw-out round trip ----------
cat "$tmp/s/hostile" "$tmp/s/session" >"$tmp/both"
python3 - "$tmp/sock" "$tmp/both" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept()
data = open(sys.argv[2], "rb").read()
for i in range(0, len(data), 7):	# dribble: 7 bytes per write
	c.sendall(data[i:i + 7])
	if i % 700 == 0:
		time.sleep(0.01)
c.close()
EOF
srv_pid=$!
for _ in $(seq 50); do [ -S "$tmp/sock" ] && break; sleep 0.1; done
timeout 60 "$OPVM" channel-dump --raw-out "$tmp/raw" "$tmp/sock" >"$tmp/sock.out" 2>"$tmp/sock.err"
rc=$?
wait "$srv_pid" 2>/dev/null
srv_pid=""
check "socket: exit 0 at EOF" [ $rc = 0 ]
check "socket: --raw-out saved every byte" cmp -s "$tmp/raw" "$tmp/both"
"$OPVM" channel-dump "$tmp/raw" >"$tmp/raw.out" 2>/dev/null
check "socket: same records as from the file" cmp -s "$tmp/sock.out" "$tmp/raw.out"
check "socket: session decoded after the hostile part" grep -qx '#17 PROC_EXIT tgid=42' "$tmp/sock.out"

# -- --follow: the guest side closes and comes back ---------------------------
python3 - "$tmp/sock2" "$tmp/s/hello" "$tmp/s/session" <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(1)
for path in sys.argv[2:]:
	c, _ = s.accept()
	data = open(path, "rb").read()
	c.sendall(data[:-5])	# the first connection ends inside a record
	if path == sys.argv[-1]:
		c.sendall(data[-5:])
	c.close()
EOF
srv_pid=$!
for _ in $(seq 50); do [ -S "$tmp/sock2" ] && break; sleep 0.1; done
timeout 60 "$OPVM" channel-dump --follow --count 18 --stats "$tmp/sock2" >"$tmp/follow.out" 2>/dev/null
rc=$?
wait "$srv_pid" 2>/dev/null
srv_pid=""
check "--follow: reconnected and stopped at --count" [ $rc = 0 ]
check "--follow: second connection decoded" grep -qx '#17 PROC_EXIT tgid=42' "$tmp/follow.out"
check "--follow: partial record dropped on reconnect" grep -q ' skipped_bytes=187 ' "$tmp/follow.out"

# -- 100 MB of random bytes through stdin, then a valid stream -----------------
/usr/bin/time -f '%M' -o "$tmp/time0" "$OPVM" channel-dump "$tmp/s/session" >/dev/null 2>&1
read -r rss0 <"$tmp/time0"
head -c $((100 * 1024 * 1024)) /dev/urandom >"$tmp/flood"
head -c 8208 /dev/zero >>"$tmp/flood"
cat "$tmp/s/session" >>"$tmp/flood"
/usr/bin/time -f '%M %e' -o "$tmp/time" "$OPVM" channel-dump --stats - \
	<"$tmp/flood" >"$tmp/flood.out" 2>/dev/null
rc=$?
read -r rss secs <"$tmp/time"
check "flood: exit 0" [ $rc = 0 ]
check "flood: session still decoded afterwards" grep -qx '#17 PROC_EXIT tgid=42' "$tmp/flood.out"
check "flood: buffer stayed within OPVM_REC_MAX" \
	python3 -c 'import re,sys; m=re.search(r"buffered_peak=(\d+)", open(sys.argv[1]).read()); sys.exit(int(m.group(1)) > 8192)' "$tmp/flood.out"
check "flood: peak RSS within 2 MB of a 1 kB decode" [ $((rss - rss0)) -lt 2048 ]
echo "MEASURED channel-dump 100 MB random flood: peak RSS ${rss} kB (${rss0} kB for a 1 kB stream), ${secs} s"
rm -f "$tmp/flood"

exit $fail
