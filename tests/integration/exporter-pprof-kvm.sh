#!/bin/bash
# opvm-test: alone (the exporter finds every QEMU on the host)
# opvm exporter's guest profiles of a KVM guest: the synthetic guest under
# qemu-system-x86_64 -accel kvm (as kvm-perf-qemu.sh runs it; its opvm
# channel on COM2), profiled through GET /debug/pprof/profile by an exporter
# started without --allow-gdbstub.  Asserted:
#   - /debug/pprof/guests offers it with the perf sampler;
#   - the profile comes back (200, X-Opvm-Sampler: perf), and go tool pprof
#     reads its cpu-clock samples, every one labelled with the guest;
#   - QMP query-status, polled on a second monitor every 50 ms for the whole
#     profile (or until the guest is done and QEMU exits), never shows the
#     guest stopped;
#   - the exporter counts the profile served and its private directory is
#     empty afterwards.
. "$(dirname "$0")/qemu-common.bash"
[ -e /dev/kvm ] || skip "no /dev/kvm on this host"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 is not installed"
command -v python3 >/dev/null 2>&1 || skip "python3 is needed"
command -v curl >/dev/null 2>&1 || skip "curl is not installed"
command -v go >/dev/null 2>&1 || skip "go is not installed (golang-go, scripts/install-deps.sh)"
[ -x "$OPVM" ] || fail "$OPVM is not built (make)"
G=$BUILD/tests/guests
if [ ! -f "$G/guest-mb.elf" ]; then
	make -s guests BUILD="$BUILD" >/dev/null || fail "cannot build the guests"
fi
mk_tmp exporter-pprof-kvm
T=$(realpath "$T")
NAME=ppk$$
export HOME=$T GOCACHE=$T/gocache PPROF_TMPDIR=$T

# The exporter's QMP socket first (it takes a QEMU's first -qmp), the
# test's own second.
qemu-system-x86_64 -M microvm -accel kvm -cpu qemu64 -m 64 -display none -no-reboot \
	-name "$NAME" -kernel "$G/guest-mb.elf" \
	-chardev "socket,id=con,path=$T/con,server=on,wait=on" -serial chardev:con \
	-chardev "socket,id=ch,path=$T/chan,server=on,wait=off" \
	-device isa-serial,chardev=ch,iobase=0x2f8,irq=3 \
	-device isa-debug-exit,iobase=0x501,iosize=1 \
	-qmp "unix:$T/qmp,server=on,wait=off" -qmp "unix:$T/ctl,server=on,wait=off" \
	> "$T/qemu.log" 2>&1 &
CLEAN_PIDS=$!
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$T/p"
"$OPVM" exporter --listen "127.0.0.1:$PORT" --no-libvirt --profile-dir "$T/p" \
	> "$T/exporter.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"
U=http://127.0.0.1:$PORT

# The console: wait for the guest, ask for the profile, let the guest go
# once the profile's session has the guest's tree (its HELLO then reaches
# the session), poll query-status until the reply is in.
timeout 200 python3 - "$T" "$U" "$NAME" <<'EOF' || { cat "$T/exporter.log"; exit 1; }
import glob, json, socket, subprocess, sys, time
T, U, name = sys.argv[1:4]
for _ in range(300):
    try:
        c = socket.socket(socket.AF_UNIX); c.connect(T + "/con"); break
    except OSError:
        time.sleep(0.1)
else:
    print("FAIL: no console socket"); sys.exit(1)
buf = b""
c.settimeout(0.2)
end = time.time() + 120
while b"waiting for a byte" not in buf and time.time() < end:
    try:
        buf += c.recv(4096)
    except socket.timeout:
        pass
if b"waiting for a byte" not in buf:
    print("FAIL: the guest did not boot"); sys.exit(1)
guests = json.loads(subprocess.run(["curl", "-sf", U + "/debug/pprof/guests"],
                                   capture_output=True, text=True).stdout)["guests"]
me = [g for g in guests if g["name"] == name]
print("RESULT /debug/pprof/guests: %s" % me)
if not me or me[0]["sampler"] != "perf" or not me[0]["profile"]:
    print("FAIL: the KVM guest is not offered with the perf sampler"); sys.exit(1)
ctl = socket.socket(socket.AF_UNIX); ctl.connect(T + "/ctl"); f = ctl.makefile("rw"); f.readline()
def qmp(cmd):
    f.write(json.dumps({"execute": cmd}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            return r
qmp("qmp_capabilities")
p = subprocess.Popen(["curl", "-s", "-D", T + "/hdr", "-o", T + "/prof.pb.gz",
                      U + "/debug/pprof/profile?guest=%s&seconds=6" % name])
limit = time.time() + 30
while not glob.glob(T + "/p/opvm-exporter.*/profile.*/session/guests/*") and time.time() < limit:
    time.sleep(0.05)
time.sleep(0.3)
c.sendall(b"g")
states, off = {}, False
while p.poll() is None and not off:
    try:
        st = qmp("query-status")["return"]["status"]
    except (OSError, ValueError):   # QEMU exits when the guest is done
        off = True
        continue
    states[st] = states.get(st, 0) + 1
    time.sleep(0.05)
p.wait()
print("RESULT query-status during the profile: %s%s" % (states, ", then the guest "
      "finished its work and QEMU exited" if off else ""))
if set(states) != {"running"} or states["running"] < 10:
    print("FAIL: the guest was not running at every poll (or too few polls)"); sys.exit(1)
EOF
hdr=$(tr -d '\r' < "$T/hdr")
echo "$hdr" | grep -i '^X-Opvm'
echo "$hdr" | head -1 | grep -q ' 200' || { cat "$T/prof.pb.gz"; fail "the profile request failed"; }
echo "$hdr" | grep -qi '^X-Opvm-Sampler: perf' || fail "not sampled by perf"
go tool pprof -raw "$T/prof.pb.gz" > "$T/raw.txt" 2>&1 || { cat "$T/raw.txt"; fail "go tool pprof cannot read it"; }
python3 - "$T/raw.txt" "$NAME" <<'EOF' || exit 1
import re, sys
raw, name = open(sys.argv[1]).read(), sys.argv[2]
samples = re.findall(r"^\s+(\d+)\s+\d+: [\d ]+\n\s+(.*)$", raw.split("Locations")[0], re.M)
tot = sum(int(n) for n, _ in samples)
mine = sum(int(n) for n, l in samples if "guest:[%s]" % name in l)
types = re.search(r"^Samples:\n(.*)$", raw, re.M).group(1).strip()
print("RESULT profile of the KVM guest: %d samples (%s), %d labelled guest %s"
      % (tot, types, mine, name))
# 6 s of cpu-clock at perf's default period; the guest's channel is an ISA
# serial port here, which /proc does not name: its samples are not
# attributed to its processes (kvm-perf-qemu.sh checks that, given --channel).
# cpu-clock counts the CPU time the vCPU gets, which a busy host cuts: the
# floor of 10 only says the guest was sampled; every sample labelled
# (mine == tot) is the verdict
sys.exit(0 if mine >= 10 and mine == tot and "cpu-clock" in types else 1)
EOF
served=$(curl -sf "$U/metrics" | awk '$1 == "opvm_profiles_served_total" { print $2 }')
[ "$served" = 1 ] || fail "opvm_profiles_served_total is '$served', not 1"
[ -z "$(find "$T/p" -mindepth 2)" ] || { find "$T/p"; fail "the session directory was left behind"; }
echo PASS
