#!/bin/bash
# Names for real software with no guest module: the Debian disk guest
# (`make images-disk`) booted by hand under TCG with opvm.ko refused and
# the relay masked (module_blacklist=opvm systemd.mask=opvm-relay.service),
# so nothing is fetched from the guest; Debian's own stripped binaries
# busy on two vCPUs (perl, gzip, python3 with json, a seq | sort | md5sum
# pipeline) while `opvm attach --qmp` samples it with an empty
# --fetch-cache and no symbol flag.  Every user name then comes from guest
# memory (vmm/introspect/memsyms.h: each mapped ELF's .dynsym read through
# its process's page tables) or from a debug file of that build-id on the
# host.  Reports, on the same session:
#   mem     no host debug files (a mount namespace hides /usr/lib/debug):
#           the .dynsym read from memory alone
#   +dbg    as a user runs it: the host's /usr/lib/debug too
#   file    the binaries themselves (copied out of disk.img with debugfs) as
#           --guest-root, no debug files: the share a fetched binary's
#           .dynsym names, what the relay would have sent
#   none    the .memsyms files taken away, the host's debug files hidden
#           too (Debian 12's libc6-dbg on the host names this libc by
#           build-id): what named nothing before
# and prints a table per binary: samples, named by memory symbols, by a
# debug file on top, by the file's .dynsym, in the file's .eh_frame groups,
# by nothing (neither a name nor a group in any of those reports); and how
# many samples a Python frame names (the interpreter's frames read from
# memory, whatever the ELF symbols).  A sample is named
# as in disk-guest-names-table.py: a symbol that is not an eh_frame group
# (IMAGE+0xADDR: bounds, no name) nor a "(...)" placeholder.  Asserts: the
# introspection made memory symbols for libc and perl's binaries, none cut
# by a budget; every binary with 50 samples or more is named from memory
# at least as well as its own file's .dynsym names it less 1 pp; the
# control names no user sample of those binaries but by Python frames.
. "$(dirname "$0")/qemu-common.bash"
. "$(dirname "$0")/disk-guest-common.bash"
need_disk
command -v debugfs >/dev/null 2>&1 || skip "debugfs is not installed (e2fsprogs)"
mk_tmp disk-guest-names
T=$(cd "$T" && pwd)
S=$T/s
C=$T/cache
SECS=${NAMES_SECS:-40}
QPID=
kill_guest() {
	[ -n "$QPID" ] && kill "$QPID" 2>/dev/null && wait "$QPID" 2>/dev/null
	QPID=
}
CLEANUP_HOOK=kill_guest
export DEBUGINFOD_URLS=

CON=$T/con
qemu-system-x86_64 -accel tcg -m 1024 -smp 2 -nodefaults -display none -no-reboot \
	-kernel "$DISK/vmlinuz" -initrd "$DISK/initrd.img" \
	-append "$DISK_CMDLINE module_blacklist=opvm systemd.mask=opvm-relay.service" \
	-drive "file=$DISK/disk.img,if=virtio,format=raw,snapshot=on" \
	-chardev "socket,id=con,path=$CON,server=on,wait=off,logfile=$T/console.log" \
	-serial chardev:con -qmp "unix:$T/qmp,server=on,wait=off" > "$T/qemu.out" 2>&1 &
QPID=$!
wait_shell 900 || { tail -30 "$T/console.log"; fail "no root shell on the disk guest's console"; }
gsh 60 'echo "kmod=$(grep -c "^opvm " /proc/modules) relay=$(systemctl is-active opvm-relay)"' |
	grep -q "kmod=0 relay=inactive" || fail "opvm.ko or its relay runs: the test needs neither"

# four busy processes for longer than the attach samples them (the script
# goes over the console as base64: one line, no quoting to survive)
cat > "$T/wl.sh" <<'WL'
e=$(( $(date +%s) + $1 ))
perl -e 'my %h; my $i = 0; while (time < $ARGV[0]) { $h{$i++ % 4096} = join(",", map { $_ * 3 } 1..16); }' "$e" &
python3 -c 'import json, sys, time
d = [{"k": i, "v": [i] * 8, "s": str(i)} for i in range(2000)]
while time.time() < float(sys.argv[1]): json.loads(json.dumps(d))' "$e" &
( while [ "$(date +%s)" -lt "$e" ]; do gzip -6 -c < /usr/bin/python3.11 > /dev/null; done ) &
( while [ "$(date +%s)" -lt "$e" ]; do seq 1 200000 | sort -r | md5sum > /dev/null; done ) &
wait
WL
gsh 60 "echo $(base64 -w0 "$T/wl.sh") | base64 -d > /tmp/wl.sh && { setsid bash /tmp/wl.sh $((SECS + 60)) > /dev/null 2>&1 < /dev/null & } && echo started" |
	grep -q started || fail "the workloads did not start"
sleep 5
"$OPVM" attach --qmp "$T/qmp" --name disk --duration "$SECS" -F 100 --fetch-cache "$C" \
	-d "$S" > "$T/attach.out" 2>&1 || { cat "$T/attach.out"; fail "opvm attach failed"; }
SJ=$S/guests/disk/samples/current/session.json
[ -f "$SJ" ] || { cat "$T/attach.out"; fail "no $SJ"; }

report() {	# report OUT [ARGS...]
	local out=$1
	shift
	"$OPVM" report -l --format json --no-host-kernel -d "$S" "$@" > "$out" 2> "$out.err" ||
		{ cat "$out.err"; fail "opvm report $*"; }
}
# the binaries with user samples, copied out of the image (read-only)
report "$T/dbg.json"
mkdir -p "$T/root"
python3 - "$T/dbg.json" <<'PY' > "$T/paths"
import json, sys
for p in sorted({r["image"] for r in json.load(open(sys.argv[1]))["symbols"]
                 if not r["kernel"] and r["image"].startswith("/")}):
    print(p)
PY
while read -r p; do
	mkdir -p "$T/root$(dirname "$p")"
	debugfs -R "dump -p $p $T/root$p" "$DISK/disk.img" > /dev/null 2>&1
done < "$T/paths"
NODEBUG=
unshare -m true 2>/dev/null && NODEBUG=1
nodebug() {	# nodebug OUT [ARGS...]: report with the host's debug files hidden
	local out=$1
	shift
	if [ -z "$NODEBUG" ]; then
		echo "no mount namespace to hide /usr/lib/debug: memory and file columns" \
			"include the host's debug files" > "$T/mem.json.skip"
		report "$out" "$@"
		return 0
	fi
	unshare -m sh -c 'mkdir -p /usr/lib/debug && mount -t tmpfs none /usr/lib/debug && exec "$@"' sh \
		"$OPVM" report -l --format json --no-host-kernel -d "$S" "$@" > "$out" 2> "$out.err" ||
		{ cat "$out.err"; fail "opvm report (no debug files) $*"; }
}
nodebug "$T/mem.json"
nodebug "$T/file.json" --guest-root "$T/root"
mv "$C" "$C.off"
nodebug "$T/none.json"
mv "$C.off" "$C"

python3 - "$SJ" "$T"/{mem,dbg,file,none}.json "$T/mem.json.skip" <<'PY' || exit 1
import json, os, sys
sj = json.load(open(sys.argv[1]))
mem, dbg, fil, none = (json.load(open(f)) for f in sys.argv[2:6])
ok = True
m = sj["introspect"]["memsyms"]
print("RESULT memsyms: %d ELFs made (%d symbols) from %d pages read, %d not resident; "
      "%d refused (%s), %d with no function to keep, %d cut by a budget; %d us" % (
      m["files"], m["syms"], m["pages"], m["pages_absent"], m["refused"],
      m.get("last_refusal"), m["empty"], m["budget"], m["us"]))
if os.path.exists(sys.argv[6]):
    print("NOTE: " + open(sys.argv[6]).read().strip())

def named(r):
    # a real name: not an eh_frame group (IMAGE+0xADDR) nor "(...)"
    s = r["symbol"]
    return bool(s) and not r.get("eh_frame") and not s.startswith("(")

def per_image(d):
    """{image: [samples, named, by a Python frame, in eh_frame groups]}"""
    t = {}
    for r in d["symbols"]:
        if r["kernel"] or not r["image"].startswith("/"):
            continue
        v = t.setdefault(r["image"], [0, 0, 0, 0])
        v[0] += r["samples"]
        v[1] += r["samples"] if named(r) else 0
        v[2] += r["samples"] if named(r) and r.get("python") else 0
        v[3] += r["samples"] if r.get("eh_frame") else 0
    return t
M, D, F, N = (per_image(x) for x in (mem, dbg, fil, none))
print("RESULT %-44s %7s %8s %8s %8s %8s %8s %8s" % ("binary", "samples", "memory", "+debug",
                                                   "file", "eh_frame", "nothing", "python"))
def pc(k, n):
    return 100.0 * k / n if n else 0.0
for img, (n, k, py, _) in sorted(M.items(), key=lambda x: -x[1][0]):
    d, f, e = D.get(img, [n, 0])[1], F.get(img, [n, 0])[1], F.get(img, [n, 0, 0, 0])[3]
    z = N.get(img, [n, 0, 0])[1] - N.get(img, [n, 0, 0])[2]
    print("RESULT %-44s %7d %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%% %7.1f%%" % (
          img[-44:], n, pc(k, n), pc(d, n), pc(f, n), pc(e, n), 100.0 - pc(max(k, d, f + e), n),
          pc(py, n)))
    if n >= 50 and pc(k, n) < pc(f, n) - 1.0:
        print("FAIL: %s: memory symbols name %.1f%%, its file's .dynsym %.1f%%" % (
              img, pc(k, n), pc(f, n))); ok = False
    if z:
        print("FAIL: %s: %d samples named with no .memsyms, no file, no debug file and no "
              "Python frame" % (img, z)); ok = False
user = sum(v[0] for v in M.values())
named = sum(v[1] for v in M.values())
print("RESULT user samples named with no guest module: %.1f%% (%d of %d) from memory symbols, "
      "%.1f%% with the host's debug files" % (pc(named, user), named, user,
      pc(sum(v[1] for v in D.values()), user)))
libs = [i for i in M if os.path.basename(i).startswith(("libc.so", "libperl", "perl"))]
if m["files"] < 2 or m["budget"] or not libs:
    print("FAIL: no memory symbols for libc and perl: %s" % m); ok = False
if user < 500:
    print("FAIL: only %d user samples" % user); ok = False
sys.exit(0 if ok else 1)
PY
