#!/bin/bash
# opvm run --from-workload on the test image under TCG (abratio): samples
# taken before abratio's exec record reached the host are counted, not
# filed.  Asserted: no (firmware/boot) sample is filed, the summary and the
# report header say when filing began, session.json's before_start counts
# what was left out, and abratio's share of what was filed is larger than
# in a run from the start (--from-exec nosuch files nothing and says so).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp qemu-from-workload

"$OPVM" run --workload abratio -F 200 --from-workload -d "$T/fw" > "$T/fw.out" 2>&1 ||
	{ cat "$T/fw.out"; fail "opvm run --from-workload failed"; }
cat "$T/fw.out"
"$OPVM" run --workload true -F 200 --from-exec nosuch -d "$T/ns" > "$T/ns.out" 2>&1 ||
	{ cat "$T/ns.out"; fail "opvm run --from-exec nosuch failed"; }
"$OPVM" report -d "$T/fw" > "$T/report.txt" 2>&1 || { cat "$T/report.txt"; fail "report"; }
"$OPVM" report -d "$T/fw" --format json > "$T/report.json" 2>&1 || fail "report --format json"
python3 - "$T/fw.out" "$T/report.txt" "$T/report.json" "$T/fw/guests/guest/samples/current/session.json" \
	"$T/ns.out" <<'PY' || fail "--from-workload"
import json, re, sys
out, rep, js, sess, ns = sys.argv[1:6]
out, rep, ns = (open(f).read().replace("\n    ", " ").replace("\n  ", " ") for f in (out, rep, ns))
j, s = json.load(open(js)), json.load(open(sess))
fails = []
m = re.search(r"filed from abratio's start, ([\d.]+) s in; (\d+) samples taken before it", out)
if not m:
    fails.append("the summary does not say when filing began")
before = s["stats"].get("before_start", 0)
if s.get("from_exec") != "abratio" or not isinstance(s.get("started_after_s"), (int, float)):
    fails.append("session.json lacks from_exec/started_after_s: %r" % {k: s.get(k) for k in ("from_exec", "started_after_s")})
# (10: the claim is that boot's samples were taken and set apart, and the
# summary says how many; a busy host's gdbstub round trip, ~100 times an
# idle one's, takes a third of the samples or less)
if before < 10 or (m and int(m.group(2)) != before):
    fails.append("before_start %d (summary %s)" % (before, m and m.group(2)))
if "filed from abratio's start" not in rep:
    fails.append("the report header does not say it")
total = j["total_samples"]
boot = sum(r["samples"] for r in j["symbols"] if r["app"] == "(firmware/boot)")
abr = sum(r["samples"] for r in j["symbols"] if r["image"].endswith("/abratio"))
if boot:
    fails.append("%d (firmware/boot) samples filed" % boot)
# abratio runs on one of two vCPUs, so about half of what is filed is the
# other vCPU idling; a run from the start files ~10 % abratio (a third of
# it is boot).  Under CI load abratio's share of filed samples went as low
# as 24.7 %: ask for 15 % and that no other program beats it.  The kernel
# without a process (app "vmlinux") is not a program, and it may: boot
# work still runs when abratio starts (free_reserved_area, ptdump, module
# signatures: 314 samples against abratio's 312 in one run here).
apps = {}
for r in j["symbols"]:
    apps[r["app"]] = apps.get(r["app"], 0) + r["samples"]
rival = max(((n, a) for a, n in apps.items() if a.startswith("/") and not a.endswith("/abratio")),
            default=(0, None))
if abr * 100 < 15 * total or rival[0] >= abr:
    fails.append("abratio %d of %d filed samples (largest other program %s: %d)"
                 % (abr, total, rival[1], rival[0]))
if not re.search(r"nosuch never started: none of \d+ samples was filed", ns):
    fails.append("--from-exec nosuch does not say it filed nothing")
print("RESULT --from-workload: filing began %s s in; %d samples before it counted, not filed; "
      "abratio %.1f%% of %d filed, (firmware/boot) %d" % (m and m.group(1), before,
      100.0 * abr / max(total, 1), total, boot))
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
exit 0
