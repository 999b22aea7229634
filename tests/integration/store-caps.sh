#!/bin/bash
# A hostile guest renaming its executable's cookie hundreds of times a second
# (a rewriting relay between QEMU's channel socket and opvm, through
# `opvm attach --qmp ... --channel SOCK`), with small caps: the sample files,
# directories, mapped files and disk stay under the caps, opvm's RSS stays
# bounded, every sample is in a file (the overflow bucket holds the rest and
# says how many), the counters are nonzero, and the tree is private (and
# 0755/0644 with --umask 022).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp store-caps

MAX_FILES=150 MAX_DIRS=700 MAX_MAPPED=12 MAX_DISK_KB=4096 RSS_MAX_KB=65536

boot_channel_guest 384 "opvm.workload=cpuloop opvm.args=400000000,50"

python3 tests/integration/hostile-relay.py --upstream "$T/chan" --listen "$T/relay" \
	--rename-hz 400 --stats "$T/relay.stats" > "$T/relay.log" 2>&1 &
rpid=$!
CLEAN_PIDS="$rpid $CLEAN_PIDS"
for _ in $(seq 50); do [ -S "$T/relay" ] && break; sleep 0.1; done

"$OPVM" attach --qmp "$T/qmp" --channel "$T/relay" --name flood --duration 20 -F 200 \
	-d "$T/s" --max-files $MAX_FILES --max-dirs $MAX_DIRS --max-mapped $MAX_MAPPED \
	--max-disk ${MAX_DISK_KB}k > "$T/attach.out" 2>&1 &
apid=$!
CLEAN_PIDS="$apid $CLEAN_PIDS"
# opvm's RSS and its mappings of sample files, every half second
peak_rss=0 peak_maps=0
while kill -0 "$apid" 2>/dev/null; do
	rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$apid/status" 2>/dev/null)
	maps=$(grep -c "$T/s/" "/proc/$apid/maps" 2>/dev/null)
	[ -n "$rss" ] && [ "$rss" -gt "$peak_rss" ] && peak_rss=$rss
	[ -n "$maps" ] && [ "$maps" -gt "$peak_maps" ] && peak_maps=$maps
	sleep 0.5
done
wait "$apid"
rc=$?
CLEAN_PIDS=${CLEAN_PIDS#"$apid "}
cat "$T/attach.out"
[ $rc = 0 ] || fail "opvm attach exited with $rc"
cat "$T/relay.stats"
# --umask: the tree as the mask says, not private
"$OPVM" attach --qmp "$T/qmp" --channel "$T/relay" --name pub --duration 2 -d "$T/s2" \
	--umask 022 > "$T/attach2.out" 2>&1 || { cat "$T/attach2.out"; fail "attach --umask 022 failed"; }
kill "$rpid" 2>/dev/null
wait "$rpid" 2>/dev/null
pub_bad=$(find "$T/s2" \( -type d ! -perm 0755 \) -o \( -type f ! -perm 0644 \) | wc -l)
pub_files=$(find "$T/s2" -type f | wc -l)
echo "--umask 022: $pub_files files, $pub_bad with other modes than 0755/0644"
[ "$pub_bad" = 0 ] && [ "$pub_files" -ge 2 ] || fail "--umask 022 did not give 0755/0644"

cur=$T/s/guests/flood/samples/current
files=$(find "$cur" -type f -name 'TIMER.*' | wc -l)
dirs=$(find "$cur" -mindepth 1 -type d | wc -l)
du_kb=$(du -sk "$cur" | cut -f1)
bad_modes=$(find "$T/s" \( -type d ! -perm 0700 \) -o \( -type f ! -perm 0600 \) | wc -l)
echo "tree: $files sample files, $dirs directories, $du_kb KiB; opvm peak RSS $peak_rss kB, at most $peak_maps sample-file mappings"
python3 - "$cur/session.json" "$T/attach.out" "$T/relay.stats" "$files" "$dirs" "$du_kb" \
	"$peak_rss" "$peak_maps" "$bad_modes" $MAX_FILES $MAX_DIRS $MAX_MAPPED $MAX_DISK_KB $RSS_MAX_KB <<'EOF' || exit 1
import json, re, sys
(sj, out, rstats, files, dirs, du_kb, rss, maps, bad_modes,
 max_files, max_dirs, max_mapped, max_disk_kb, rss_max) = sys.argv[1:]
files, dirs, du_kb, rss, maps, bad_modes = map(int, (files, dirs, du_kb, rss, maps, bad_modes))
max_files, max_dirs, max_mapped, max_disk_kb, rss_max = map(int, (max_files, max_dirs, max_mapped, max_disk_kb, rss_max))
j = json.load(open(sj))
st, so = j["stats"], j["store"]
renames = int(re.search(r"renames=(\d+)", open(rstats).read()).group(1))
m = re.search(r"samples: (\d+) in files \(kernel (\d+), user (\d+)\)", open(out).read())
in_files, kern, user = map(int, m.groups())
print("RESULT rename flood: %d renames, %d samples (%d user), %d in the overflow bucket "
      "(%d keys); store %d files %d dirs %d KiB, %d mapped at most; opvm peak RSS %d kB"
      % (renames, in_files, user, so["overflow_samples"], so["overflow_keys"], so["files"],
         so["dirs"], so["disk_bytes"] // 1024, so["mapped_peak"], rss))
checks = [
    ("renames sent", renames > 1000),
    ("samples taken", user > 200),
    ("every sample in a file", in_files == kern + user == st["received"]),
    ("overflow bucket used", so["overflow_samples"] > 0 and so["overflow_keys"] > 0),
    ("files capped", files <= max_files + 1 and so["files"] <= max_files + 1),
    ("dirs capped", dirs <= max_dirs + 4 and so["dirs"] <= max_dirs + 4),
    ("mappings capped", so["mapped_peak"] <= max_mapped and maps <= max_mapped),
    ("disk capped", du_kb <= max_disk_kb + 64 and so["disk_bytes"] <= (max_disk_kb + 16) * 1024),
    ("RSS bounded", 0 < rss <= rss_max),
    ("nothing unfiled", j["store_errors"] == 0),
    ("tree private", bad_modes == 0),
    ("summary names the bucket", "{overflow} bucket" in open(out).read()),
]
bad = [n for n, ok in checks if not ok]
for n, ok in checks:
    print(("ok    " if ok else "FAIL  ") + n)
sys.exit(1 if bad else 0)
EOF
echo PASS
