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
# Prints opvm's RSS (VmRSS, every second) at the start (the mean of the 30 s
# after the warm-up, max(90 s, 20 % of the run)) and at the end (the mean of
# the last 30 s), the disk used, and the session's counters; fails if the RSS
# moved by more than 5 % between the two, or if the caps did not hold.
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
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$apid/status" 2>/dev/null; }
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
	if [ -n "$r" ]; then
		echo "$now $r" >> "$T/rss"
		if [ $now -ge $warm ]; then
			[ -z "$rss_min" ] || [ "$r" -lt "$rss_min" ] && rss_min=$r
			[ "$r" -gt "$rss_max" ] && rss_max=$r
		fi
		if [ $((now / 60)) != $last_min ]; then
			last_min=$((now / 60))
			echo "soak: ${now} s: RSS $r kB ($(rss_parts)), $(store_line), $(cat "$T/relay.stats" 2>/dev/null)"
		fi
	fi
	sleep 1
done
# the means of [warm, warm + 30) and of the last 30 s before the end
rss_start=$(awk -v a=$warm -v b=$((warm + 30)) '$1 >= a && $1 < b {s += $2; n++} END {if (n) printf "%d", s / n}' "$T/rss")
rss_end=$(awk -v a=$((secs - 35)) -v b=$((secs - 5)) '$1 >= a && $1 < b {s += $2; n++} END {if (n) printf "%d", s / n}' "$T/rss")
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
python3 - "$cur/session.json" "$rss_start" "$rss_end" <<'EOF' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
a, b = int(sys.argv[2]), int(sys.argv[3])
so, st, m, ch = j["store"], j["stats"], j["model"], j["channel"]
print("counters: stats %s" % json.dumps(st))
print("counters: store %s" % json.dumps({k: v for k, v in so.items() if k != "limits"}))
print("counters: model %s" % json.dumps(m))
print("counters: channel records %d, refused %d, seq_gaps %d; store_errors %d"
      % (ch["records"], ch["refused"], ch["seq_gaps"], j["store_errors"]))
drift = 100.0 * (b - a) / a
print("RESULT soak %.1f min: RSS %d -> %d kB (%+.1f %%), %d samples, %d in the overflow bucket"
      % (j["duration_s"] / 60, a, b, drift, st["kernel"] + st["user"], so["overflow_samples"]))
lim = so["limits"]
ok = (abs(drift) <= 5.0 and so["files"] <= lim["max_files"] + 1 and
      so["mapped_peak"] <= lim["max_mapped"] and j["store_errors"] == 0 and
      m["mem_bytes"] <= m["max_bytes"])
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
EOF
