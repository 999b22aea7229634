#!/bin/bash
# Differential exports of two real profiles: abratio under QEMU TCG with
# func_a doing 2 % of the work, then 30 %.  Asserts:
#  - opvm export --format html --diff OLD, drawn by its script in headless
#    chromium, colours func_a's frame red (grew) and func_b's blue (shrank),
#    and func_a's width is its share of the new profile;
#  - two pprof exports go through `go tool pprof -diff_base` with func_a's
#    flat delta positive.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
command -v chromium >/dev/null || skip "chromium is missing (apt-get install chromium)"
mk_tmp qemu-diff-fg
export DEBUGINFOD_URLS=
sym=(--guest-root "$IMG/root" --system-map "$IMG/System.map")

for split in 2 30; do
	# --from-workload: the profiles are abratio's time, not the boot's too,
	# whose length relative to the workload's a loaded host changes (it
	# made func_b's share of the whole grow once)
	timeout 300 "$OPVM" run --workload "abratio:3,$split" --from-workload -F 200 -d "$T/s$split" \
		> "$T/run$split.out" 2>&1 || { cat "$T/run$split.out"; fail "opvm run (split $split)"; }
	grep -q "OPVM-TRUTH abratio share func_a=0.$(printf %02d $split)" \
		"$T/s$split/guests/guest/console.log" || fail "abratio did not take split $split"
done
report_json "$T/s30" > "$T/new.json" || fail "opvm report (new)"
"$OPVM" export --format html --diff "$T/s2" -o "$T/diff.html" --session-dir "$T/s30" "${sym[@]}" ||
	fail "opvm export --format html --diff"

mkdir -p "$T/profile"
timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
	--no-first-run --user-data-dir="$T/profile" --window-size=1600,1000 \
	--dump-dom "file://$(cd "$T" && pwd)/diff.html" > "$T/dom.html" 2> "$T/chromium.err" &
CLEAN_PIDS="$CLEAN_PIDS $!"
wait $! || { tail -5 "$T/chromium.err"; fail "chromium failed"; }

python3 - "$T/dom.html" "$T/new.json" <<'PY' || exit 1
import json, re, sys
dom = open(sys.argv[1]).read()
rep = json.load(open(sys.argv[2]))
frames = {}
for m in re.finditer(r'<div class="f"[^>]*style="([^"]*)"[^>]*>([^<]*)<', dom):
    frames.setdefault(m.group(2), []).append(m.group(1))
def frame(name):
    if name not in frames:
        print("FAIL: no drawn frame for %s (frames: %s)" % (name, sorted(frames)[:20])); sys.exit(1)
    st = frames[name][0]
    rgb = tuple(int(x) for x in re.search(r'background: rgb\((\d+), (\d+), (\d+)\)', st).groups())
    width = float(re.search(r'width: ([0-9.]+)%', st).group(1))
    return rgb, width
(ar, ag, ab), aw = frame("func_a")
(br, bg, bb), bw = frame("func_b")
fa = sum(r["samples"] for r in rep["symbols"] if r["symbol"] == "func_a")
share = 100.0 * fa / rep["total_samples"]
print("RESULT func_a frame: rgb(%d,%d,%d), width %.2f %% (its share of the new profile %.2f %%)"
      % (ar, ag, ab, aw, share))
print("RESULT func_b frame: rgb(%d,%d,%d), width %.2f %%" % (br, bg, bb, bw))
ok = True
# Hue, not depth: how deep depends on the largest change among all symbols,
# which boot noise in the kernel can hold.
if not (ar == 255 and ag == ab and ab < 255):
    print("FAIL: func_a is not coloured as grown (red)"); ok = False
if not (bb == 255 and br == bg and br < 255):
    print("FAIL: func_b is not coloured as shrunk (blue)"); ok = False
if abs(aw - share) > 0.1:
    print("FAIL: func_a's width is not its share of the new profile"); ok = False
sys.exit(0 if ok else 1)
PY

# pprof: both exports, then go tool pprof -diff_base.
if command -v go >/dev/null; then
	for split in 2 30; do
		"$OPVM" export --format pprof -o "$T/p$split.pb.gz" --session-dir "$T/s$split" "${sym[@]}" ||
			fail "opvm export --format pprof (split $split)"
	done
	HOME=$T GOCACHE=$T/gocache GOFLAGS=-mod=mod timeout 120 go tool pprof -top -sample_index=samples \
		-diff_base "$T/p2.pb.gz" "$T/p30.pb.gz" > "$T/pdiff.txt" 2> "$T/pdiff.err" ||
		{ cat "$T/pdiff.err"; fail "go tool pprof -diff_base failed"; }
	line=$(grep -E ' func_a$' "$T/pdiff.txt" | head -1)
	echo "RESULT go tool pprof -diff_base: $line"
	flat=$(echo "$line" | awk '{print $1}')
	[ -n "$flat" ] && [ "${flat#-}" = "$flat" ] && [ "$flat" != 0 ] ||
		{ cat "$T/pdiff.txt"; fail "func_a's flat delta in pprof -diff_base is not positive"; }
else
	echo "go is not installed: pprof -diff_base part not run"
fi
echo "PASS"
