#!/bin/bash
# opvm run --disk IMAGE, as a CI job runs it: the Debian disk guest `make
# images-disk` builds, booted with the kernel and initrd of its own /boot
# (copied out of the image by opvm), its workload unit running
# `opvm-wl timed python` from opvm.workload= and powering the guest off,
# which ends the run.  Checks: the relay's HELLO and kernel symbols came
# with no flags, python3.11 was sampled and named, the image was not
# written (snapshot), the run directory's copies are gone.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
mk_tmp disk-guest-run
img=$(realpath "$DISK/disk.img")
before=$(stat -c '%s %Y' "$img")
t0=$(date +%s)
XDG_CACHE_HOME=$T/cache timeout 900 "$OPVM" run --disk "$img" --workload timed-python \
	-F 50 -d "$T/s" > "$T/run.out" 2>&1 || { cat "$T/run.out"; fail "opvm run --disk failed"; }
echo "MEASURED opvm run --disk: power-on to power-off in $(( $(date +%s) - t0 )) s"
cat "$T/run.out"
con=$T/s/guests/guest/console.log
grep -a "OPVM-TIMED python" "$con" || { tail -20 "$con"; fail "the workload did not run (console above)"; }
grep -q "from the guest: [0-9]* kernel symbols" "$T/run.out" ||
	fail "no kernel symbols from the guest's relay"
[ "$(stat -c '%s %Y' "$img")" = "$before" ] || fail "opvm run --disk changed the image"
report_json_plain() {
	"$OPVM" report -l --format json -d "$T/s"
}
report_json_plain > "$T/r.json" || fail "opvm report"
python3 - "$T/r.json" <<'EOF' || fail "python3 in the disk guest's profile"
import json, sys
sys.path.insert(0, "tests/integration")
from bounds import count_lo
d = json.load(open(sys.argv[1]))
rows = [r for r in d["symbols"] if r["app"].endswith("/python3.11")]
n = sum(r["samples"] for r in rows)
ev = sum(r["samples"] for r in rows if r["symbol"] == "_PyEval_EvalFrameDefault")
# minimums from what the run sampled (a busy host takes fewer samples):
# the timed python workload is a part of the guest's user time (10 % under two
# busy loops, where systemd's boot took the rest), and the
# interpreter's loop a good part of python's (5 % at least, asked for when
# 6 or more are expected)
user = sum(r["samples"] for r in d["symbols"] if not r["kernel"])
kr = d["guests"][0].get("kernel_release")
print("RESULT opvm run --disk: kernel %s, python3.11 %d samples (at least %.0f expected of %d "
      "user samples), %d in _PyEval_EvalFrameDefault" % (kr, n, count_lo(user, 0.05), user, ev))
if not n or n < count_lo(user, 0.05) or (ev == 0 and 0.05 * n >= 6):
    print("FAIL: python3.11 not sampled and named"); sys.exit(1)
EOF
exit 0
