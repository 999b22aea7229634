#!/bin/bash
# Built-in KVM VMM in PMU mode: the same per-vCPU-thread sampling path as
# timer mode (tests/integration/kvm-synthetic.sh), with hardware events
# (cycles and instructions, exclude_host=1) instead of the task clock.
# Runs wherever the host has a hardware PMU; skips elsewhere.
#
# With instructions as the event the A:B split is exact by construction:
# func_a and func_b run the same two-instruction loop, 1:3 iterations.
set -u
BUILD=${BUILD:-build}
OPVM=${OPVM:-$BUILD/opvm}
G=$BUILD/tests/guests
T=$BUILD/tmp/kvm-pmu.$$
trap 'rm -rf "$T"' EXIT
mkdir -p "$T"

pmu_param=$(cat /sys/module/kvm/parameters/enable_pmu 2>/dev/null || echo "?")
if [ ! -e /dev/kvm ]; then
	echo "SKIP: no /dev/kvm on this host"
	exit 77
fi
if "$OPVM" list-events 2>&1 | grep -q "no hardware PMU"; then
	echo "SKIP: no hardware PMU on this host (kvm.enable_pmu=$pmu_param)"
	exit 77
fi
[ -f "$G/guest.elf" ] || make -s guests BUILD="$BUILD" >/dev/null || exit 1

if ! "$OPVM" run --vmm=kvm --kernel "$G/guest.elf" --mem 64 -d "$T/s" --separate thread \
	-e instructions:1000000 -e cycles:1000000 >"$T/run.out" 2>&1; then
	echo "FAIL: opvm run --vmm=kvm in PMU mode"; cat "$T/run.out"; exit 1
fi
cat "$T/run.out"
grep -q "mode kvm-pmu" "$T/run.out" || { echo "FAIL: not in kvm-pmu mode"; exit 1; }
for ev in instructions cycles; do
	"$OPVM" report --session-dir "$T/s" --separate thread -l --format json \
		--guest-root "$G" --vmlinux "$G/guest.elf" "event:$ev" >"$T/$ev.json" || exit 1
done
python3 - "$T/instructions.json" "$T/cycles.json" <<'PY'
import json, sys
fails = []
for path in sys.argv[1:]:
    rep = json.load(open(path))
    a = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and s["tgid"] == 1)
    b = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and s["tgid"] == 2)
    bad = sum(s["samples"] for s in rep["symbols"] if not s["kernel"] and
              ((s["tgid"] == 1 and s["symbol"] == "func_b") or
               (s["tgid"] == 2 and s["symbol"] == "func_a")))
    print("RESULT kvm-pmu %s: mode %s, A=%d B=%d wrong-address-space=%d" %
          (rep.get("event"), rep.get("mode"), a, b, bad))
    # (20: the guest was sampled; how many a fixed-length run gets follows
    # the CPU its vCPU thread is given, which a busy host cuts)
    if rep.get("mode") != "kvm-pmu" or a + b < 20 or bad:
        fails.append(path)
    if rep.get("event") == "instructions" and abs(100.0 * a / (a + b) - 25.0) > 3:
        fails.append("instructions A:B %.1f%% vs 25%%" % (100.0 * a / (a + b)))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
