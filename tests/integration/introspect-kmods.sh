#!/bin/bash
# Kernel modules named from the guest's own memory (docs/introspection.md,
# "Modules"): opvm run boots the test image (QEMU TCG) with opvm.kmod=0,
# so no opvm.ko, no relay, no channel records, and --no-image-symbols;
# opvm report runs with --no-host-kernel.  The kmodhash workload loads the
# host Debian kernel's own af_alg, algif_hash and wp512 modules (after
# introspection found the kernel: a module loaded later) and hashes with
# Whirlpool through AF_ALG for 4 s, so most of its kernel time is in
# wp512.ko's text.  Asserts:
#  - session.json introspect.modules: read, the 6.1 layout (core_layout),
#    the virtio modules and the three loaded, nothing cut, refused or
#    duplicated, at least one transfer of their symbols;
#  - <guest>/kallsyms.modules gives wp512's text, and its kallsyms lines
#    are those of the module file's own text symbols (ground truth: the
#    .ko's symbol table, read with nm);
#  - >= 99 % of the kernel's samples (but firmware/boot; count-aware: 3
#    sigma over a 1 % miss rate) are named, modules included;
#  - at least 10 samples under the image wp512, >= 99 % of them (count-
#    aware) named by a text symbol of wp512.ko, most by
#    wp512_process_buffer;
#  - control: the same session without the modules' kallsyms lines names
#    none of wp512's samples.
. "$(dirname "$0")/qemu-common.bash"
need_qemu
mk_tmp introspect-kmods
S=$T/session
export DEBUGINFOD_URLS=
KO=$(grep -m1 '/wp512\.ko$' "$IMG/root/etc/opvm/work-modules" 2>/dev/null) ||
	skip "no wp512.ko in the test image: run 'make images'"
[ -f "$IMG/root/usr/bin/kmodhash" ] || skip "no kmodhash in the test image: run 'make images'"

"$OPVM" run --workload "kmodhash:4" --append "quiet opvm.kmod=0" --no-image-symbols \
	-F 200 -d "$S" > "$T/run.out" 2> "$T/run.err" ||
	{ cat "$T/run.out" "$T/run.err"; fail "opvm run exited with $?"; }
G=$S/guests/guest
grep -aq "OPVM-READY kmod=0" "$G/console.log" || fail "opvm.ko was loaded: the test needs opvm.kmod=0"
grep -aq "OPVM-TRUTH kmodhash module=wp512 bytes=" "$G/console.log" ||
	{ grep -a kmodhash "$G/console.log"; fail "kmodhash did not hash (see $G/console.log)"; }
[ -f "$G/kallsyms" ] || fail "no $G/kallsyms: introspection named no kernel symbol"
"$OPVM" report -l --format json --no-host-kernel --session-dir "$S" > "$T/r.json" 2> "$T/r.err" ||
	{ cat "$T/r.err"; fail "opvm report"; }
cp -a "$S" "$T/control" && grep -v '	\[' "$G/kallsyms" > "$T/control/guests/guest/kallsyms"
"$OPVM" report -l --format json --no-host-kernel --session-dir "$T/control" > "$T/c.json" \
	2> "$T/c.err" || { cat "$T/c.err"; fail "opvm report (control)"; }
nm --defined-only "$IMG/root$KO" > "$T/ko.nm" || fail "nm $IMG/root$KO"

PYTHONPATH="$(dirname "$0")" python3 - "$T/r.json" "$T/c.json" "$G/samples/current/session.json" \
	"$G/kallsyms" "$G/kallsyms.modules" "$T/ko.nm" <<'PY' || exit 1
import json, os, sys
import bounds
r, c, sj = (json.load(open(f)) for f in sys.argv[1:4])
ok = True
m = sj["introspect"].get("modules", {})
print("RESULT modules from guest memory: %s" % m)
if not m.get("read") or m.get("layout") != "core_layout" or m["modules"] < 5 or m["cut"] or \
   m["bad_ptr"] or m["refused"] or m["dups"] or m["transfers"] < 1 or m["tables_bad"]:
    print("FAIL: the module list was not read cleanly"); ok = False

# ground truth: wp512.ko's own text symbols, at the base the guest gave
ko = {l.split()[2] for l in open(sys.argv[6]) if len(l.split()) == 3 and l.split()[1] in "tT"}
mods = {l.split()[2]: (int(l.split()[0], 16), int(l.split()[1], 16))
        for l in open(sys.argv[5])} if os.path.exists(sys.argv[5]) else {}
lines = [l.split() for l in open(sys.argv[4]) if l.rstrip().endswith("\t[wp512]") or
         l.rstrip().endswith(" [wp512]")]
base, size = mods.get("wp512", (0, 0))
inside = [l for l in lines if base <= int(l[0], 16) < base + size]
print("RESULT wp512: text %#x + %#x; %d kallsyms lines (%d inside its text), the .ko has %d "
      "text symbols: %d of them sent" % (base, size, len(lines), len(inside), len(ko),
      len({l[2] for l in lines} & ko)))
if not size or len(inside) != len(lines) or not lines or not {l[2] for l in lines} <= ko or \
   "wp512_process_buffer" not in {l[2] for l in lines}:
    print("FAIL: wp512's symbols are not the module's own"); ok = False

def kernel(d):
    return [x for x in d["symbols"] if x["kernel"] and x["app"] != "(firmware/boot)"]
rows = kernel(r)
tot = sum(x["samples"] for x in rows)
named = sum(x["samples"] for x in rows if x["symbol"])
byimg = {}
for x in rows:
    byimg[x["image"]] = byimg.get(x["image"], 0) + x["samples"]
print("RESULT kernel samples named with no opvm.ko: %.1f %% (%d of %d); by image %s" % (
      100.0 * named / max(tot, 1), named, tot, byimg))
# the floor only says the kernel was sampled (a busy host's gdbstub round trip is ~100 times an idle one's: a third of the
# samples or less); the misses allowed are the verdict
if tot < 10 or tot - named > bounds.allowed_misses(tot, 0.01):
    print("FAIL: fewer than 99 % of kernel samples named"); ok = False
wp = [x for x in rows if x["image"] == "wp512"]
wt = sum(x["samples"] for x in wp)
wn = sum(x["samples"] for x in wp if x["symbol"] in ko)
top = max(wp, key=lambda x: x["samples"])["symbol"] if wp else None
cw = sum(x["samples"] for x in kernel(c) if x["image"] == "wp512" and x["symbol"])
print("RESULT wp512's samples named by its functions: %.1f %% (%d of %d), most by %s; "
      "control without its kallsyms lines: %d named" % (100.0 * wn / max(wt, 1), wn, wt, top, cw))
# (at least 10: wp512 ran and was sampled; the misses and the top are the verdict)
if wt < 10 or wt - wn > bounds.allowed_misses(wt, 0.01) or top != "wp512_process_buffer":
    print("FAIL: wp512's samples are not named by the module's functions"); ok = False
if cw:
    print("FAIL: the control names wp512's samples without the modules' symbols"); ok = False
sys.exit(0 if ok else 1)
PY
