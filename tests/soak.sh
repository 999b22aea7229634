#!/bin/bash
# make soak: profile a real guest for SOAK_MINUTES (default 30) under hostile
# churn, and check that opvm's memory stays flat.
#
# The guest (the test image under QEMU/TCG) runs a process storm (forker:
# fork + exec + exit, endlessly); its channel reaches opvm through the
# rewriting relay of tests/integration/hostile-relay.py, which adds a
# cookie-rename flood (the executable of every process renamed, 400/s) and a
# mapping storm (new file mappings over live processes, 200/s).  opvm runs
# `attach --qmp ... --channel RELAY` with SOAK_OPVM_ARGS (default: kernel
# samples kept under each renamed application too, and caps small enough to
# be reached in the first minute, so that the rest of the run is the steady
# state the bound is about).
#
# Beside it, `opvm exporter --no-libvirt` reads the same guest (its QMP and
# /proc) and is scraped twice a second, so that its reading thread, its
# connection pool and the reading per guest run for the whole soak too.
#
# Prints opvm's RSS (VmRSS, every second) at the start (the mean of the 30 s
# after the warm-up, max(90 s, 20 % of the run)) and at the end (the mean of
# the last 30 s), the disk used, and the session's counters; fails if the RSS
# moved by more than 5 % between the two, or if the caps did not hold.
# Likewise the exporter's RSS, and both processes' open descriptors (the
# count at the end may not pass the most seen just after the warm-up by more
# than 2).
# Means, because VmRSS includes the pages of the mapped sample files, which
# come and go as cold files are unmapped.
# Not part of `make check` (it runs for half an hour).
set -u
SOAK_MINUTES=${SOAK_MINUTES:-30}
SOAK_OPVM_ARGS=${SOAK_OPVM_ARGS:---separate kernel --max-files 500 --max-dirs 2500 --max-mapped 64 --max-disk 256M -F 200}
. "$(dirname "$0")/integration/qemu-common.bash"
cd "$(dirname "$0")/.." || exit 1
need_qemu
mk_tmp soak

secs=$(awk -v m="$SOAK_MINUTES" 'BEGIN { printf "%d", m * 60 }')
[ "$secs" -ge 120 ] || fail "SOAK_MINUTES=$SOAK_MINUTES: give at least 2 minutes"
warm=$((secs / 5)); [ $warm -lt 90 ] && warm=90

boot_channel_guest 512 "opvm.workload=forker opvm.args=100000000"

python3 tests/integration/hostile-relay.py --upstream "$T/chan" --listen "$T/relay" \
	--rename-hz 400 --mmap-hz 200 --stats "$T/relay.stats" > "$T/relay.log" 2>&1 &
rpid=$!
CLEAN_PIDS="$rpid $CLEAN_PIDS"
for _ in $(seq 50); do [ -S "$T/relay" ] && break; sleep 0.1; done

echo "soak: $SOAK_MINUTES min, warm-up ${warm} s, opvm attach $SOAK_OPVM_ARGS"
# shellcheck disable=SC2086
"$OPVM" attach --qmp "$T/qmp" --channel "$T/relay" --name soak --duration "$secs" \
	-d "$T/s" $SOAK_OPVM_ARGS > "$T/attach.out" 2>&1 &
apid=$!
CLEAN_PIDS="$apid $CLEAN_PIDS"
eport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$OPVM" exporter --listen "127.0.0.1:$eport" --no-libvirt --min-interval 0 > "$T/exporter.log" 2>&1 &
epid=$!
CLEAN_PIDS="$epid $CLEAN_PIDS"
for _ in $(seq 300); do	# it takes its first reading before it serves
	grep -q serving "$T/exporter.log" 2>/dev/null && break
	sleep 0.1
done
scrapes=0 scrape_fail=0
rss() { awk '/^VmRSS:/ {print $2}' "/proc/${1:-$apid}/status" 2>/dev/null; }
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
store_line() {
	python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["store"]; print("files %d overflow %d" % (s["files"], s["overflow_samples"]))' \
		"$T/s/guests/soak/samples/current/session.json" 2>/dev/null
}
rss_parts() { awk '/^Rss(Anon|File):/ {printf "%s %s kB  ", $1, $2}' "/proc/$apid/status" 2>/dev/null; }
t0=$(date +%s)
rss_min="" rss_max=0 last_min=-1
: > "$T/rss"
while kill -0 "$apid" 2>/dev/null; do
	now=$(( $(date +%s) - t0 ))
	r=$(rss)
	for _ in 1 2; do
		scrapes=$((scrapes + 1))
		curl -s -m 2 -o /dev/null "http://127.0.0.1:$eport/metrics" || scrape_fail=$((scrape_fail + 1))
		sleep 0.4
	done
	if [ -n "$r" ]; then
		echo "$now $r $(fds "$apid") $(rss "$epid") $(fds "$epid")" >> "$T/rss"
		if [ $now -ge $warm ]; then
			[ -z "$rss_min" ] || [ "$r" -lt "$rss_min" ] && rss_min=$r
			[ "$r" -gt "$rss_max" ] && rss_max=$r
		fi
		if [ $((now / 60)) != $last_min ]; then
			last_min=$((now / 60))
			echo "soak: ${now} s: RSS $r kB ($(rss_parts)), fds $(fds "$apid"), $(store_line), $(cat "$T/relay.stats" 2>/dev/null)"
			echo "soak: ${now} s: exporter RSS $(rss "$epid") kB, fds $(fds "$epid"), $scrapes scrapes, $scrape_fail failed"
		fi
	fi
	sleep 0.2
done
# the means of [warm, warm + 30) and of the last 30 s before the end
rss_start=$(awk -v a=$warm -v b=$((warm + 30)) '$1 >= a && $1 < b {s += $2; n++} END {if (n) printf "%d", s / n}' "$T/rss")
rss_end=$(awk -v a=$((secs - 35)) -v b=$((secs - 5)) '$1 >= a && $1 < b {s += $2; n++} END {if (n) printf "%d", s / n}' "$T/rss")
# the exporter's RSS likewise, the descriptors' end count against the
# most seen after the warm-up: "START END MAX" for columns 3 (opvm), 4 and 5
# (the exporter's RSS and descriptors)
col() {
	awk -v a=$warm -v b=$((warm + 30)) -v c=$((secs - 35)) -v d=$((secs - 5)) -v k="$1" '
		$1 >= a && $1 < b { s += $k; n++ } $1 >= c && $1 < d { e += $k; m++ }
		$1 >= a && $1 < b && $k > mx { mx = $k }
		END { if (n && m) printf "%d %d %d", s / n, e / m, mx }' "$T/rss"
}
read -r fd_start fd_end fd_max <<< "$(col 3)"
read -r erss_start erss_end _ <<< "$(col 4)"
read -r efd_start efd_end efd_max <<< "$(col 5)"
kill "$epid" 2>/dev/null
wait "$epid" 2>/dev/null
CLEAN_PIDS=${CLEAN_PIDS#"$epid "}
wait "$apid"
rc=$?
CLEAN_PIDS=${CLEAN_PIDS#"$apid "}
kill "$rpid" 2>/dev/null
wait "$rpid" 2>/dev/null
cat "$T/attach.out"
[ $rc = 0 ] || fail "opvm attach exited with $rc"
[ -n "$rss_start" ] && [ -n "$rss_end" ] || fail "no RSS figures (opvm ended early?)"
cur=$T/s/guests/soak/samples/current
du_kb=$(du -sk "$T/s" | cut -f1)
echo "soak: RSS start ${rss_start} kB, end ${rss_end} kB (after warm-up: min ${rss_min}, max ${rss_max}); disk ${du_kb} KiB; relay: $(cat "$T/relay.stats")"
python3 - "$cur/session.json" "$rss_start" "$rss_end" "${fd_start:-0} ${fd_end:-0} ${fd_max:-0}" \
	"${erss_start:-0} ${erss_end:-0}" "${efd_start:-0} ${efd_end:-0} ${efd_max:-0}" \
	"$scrapes $scrape_fail" <<'EOF' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
a, b = int(sys.argv[2]), int(sys.argv[3])
fd0, fd1, fdm = map(int, sys.argv[4].split())
ea, eb = map(int, sys.argv[5].split())
efd0, efd1, efdm = map(int, sys.argv[6].split())
ns, nf = map(int, sys.argv[7].split())
so, st, m, ch = j["store"], j["stats"], j["model"], j["channel"]
print("counters: stats %s" % json.dumps(st))
print("counters: store %s" % json.dumps({k: v for k, v in so.items() if k != "limits"}))
print("counters: model %s" % json.dumps(m))
print("counters: channel records %d, refused %d, seq_gaps %d; store_errors %d"
      % (ch["records"], ch["refused"], ch["seq_gaps"], j["store_errors"]))
drift = 100.0 * (b - a) / a
print("RESULT soak %.1f min: RSS %d -> %d kB (%+.1f %%), %d samples, %d in the overflow bucket"
      % (j["duration_s"] / 60, a, b, drift, st["kernel"] + st["user"], so["overflow_samples"]))
edrift = 100.0 * (eb - ea) / ea if ea else 100.0
print("RESULT soak: opvm fds %d -> %d (max %d just after warm-up); exporter RSS %d -> %d kB (%+.1f %%), "
      "fds %d -> %d (max %d), %d scrapes, %d failed"
      % (fd0, fd1, fdm, ea, eb, edrift, efd0, efd1, efdm, ns, nf))
lim = so["limits"]
ok = (abs(drift) <= 5.0 and abs(edrift) <= 5.0 and fd1 <= fdm + 2 and efd1 <= efdm + 2 and
      nf == 0 and so["files"] <= lim["max_files"] + 1 and
      so["mapped_peak"] <= lim["max_mapped"] and j["store_errors"] == 0 and
      m["mem_bytes"] <= m["max_bytes"])
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
