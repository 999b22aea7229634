#!/bin/bash
# opvm-test: alone (opvm top lists every guest on the host)
# opvm top on two bare QEMU guests pinned to the same host CPU: a busy one
# (the test image under TCG running abratio, with QMP and the opvm channel)
# and an idle one (SeaBIOS only, under KVM: it halts, so it exits).
#  1. `opvm top --once --format json` ranks the busy guest first by CPU,
#     shows the idle one's steal > 0 and its KVM exits rising;
#  2. the full-screen view in a real terminal (tmux): both rows, sort keys
#     c and n reorder them;
#  3. the p key profiles the busy guest with opvm attach and shows its top
#     symbol, abratio's func_b, in place.
# Nothing here stops a guest except opvm attach's own gdbstub ticks (3).
. "$(dirname "$0")/qemu-common.bash"
need_qemu
[ -w /dev/kvm ] || skip "no /dev/kvm (the idle guest runs under KVM to have exits)"
command -v tmux >/dev/null 2>&1 || skip "tmux is not installed (scripts/install-deps.sh)"
command -v taskset >/dev/null 2>&1 || skip "taskset is not installed (util-linux)"
mk_tmp top-qemu
T=$(realpath "$T")
P=t$$
BUSY=$P-b-busy
IDLE=$P-a-idle
TMUX_SOCK=opvm-top-$$
# Both on host CPU 0, at a priority above the other tests that may share this
# machine (the figures are about these two guests, not about them).
PIN="nice -n -10 taskset -c 0"
stop_tmux() { tmux -L "$TMUX_SOCK" kill-server 2>/dev/null; }
CLEANUP_HOOK=stop_tmux

$PIN qemu-system-x86_64 -accel tcg -m 384 -nodefaults -display none \
	-name "$BUSY,debug-threads=on" -qmp "unix:$T/busy.qmp,server=on,wait=off" \
	-serial "file:$T/busy.console" \
	-device virtio-serial-pci,id=ser \
	-chardev "socket,id=opvm0,path=$T/busy.chan,server=on,wait=off" \
	-device virtserialport,bus=ser.0,chardev=opvm0,name=org.opvm.0 \
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet opvm.workload=abratio opvm.args=300" \
	> "$T/busy.log" 2>&1 &
CLEAN_PIDS=$!
$PIN qemu-system-x86_64 -accel kvm -cpu qemu64 -m 64 -nodefaults -display none \
	-name "$IDLE,debug-threads=on" -qmp "unix:$T/idle.qmp,server=on,wait=off" \
	> "$T/idle.log" 2>&1 &
CLEAN_PIDS="$CLEAN_PIDS $!"
for _ in $(seq 900); do
	grep -aq "OPVM-TRUTH abratio share" "$T/busy.console" 2>/dev/null && break
	sleep 0.2
done
grep -aq "OPVM-TRUTH abratio share" "$T/busy.console" || fail "the busy guest did not start abratio"

# ---- 1: --once --format json -------------------------------------------------
"$OPVM" top --once --format json --no-libvirt -f "$P-" -d 2 > "$T/once1.json" ||
	fail "opvm top --once failed"
sleep 1
"$OPVM" top --once --format json --no-libvirt -f "$P-" -d 2 > "$T/once2.json" ||
	fail "opvm top --once failed"
python3 - "$T/once1.json" "$T/once2.json" "$BUSY" "$IDLE" <<'EOF' || exit 1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
busy, idle = sys.argv[3], sys.argv[4]
g2 = {g["name"]: g for g in b["guests"]}
order = [g["name"] for g in b["guests"]]
g1 = {g["name"]: g for g in a["guests"]}
print("RESULT top --once: order %s; cpu%% busy %.1f idle %.1f; steal%% busy %.2f idle %.2f"
      % (order, g2[busy]["cpu_pct"], g2[idle]["cpu_pct"], g2[busy]["steal_pct"], g2[idle]["steal_pct"]))
print("RESULT top --once: idle exits %s -> %s (%.1f/s, top %s); busy exits: %s"
      % (g1[idle]["exits"], g2[idle]["exits"], g2[idle]["exits_per_s"] or 0,
         g2[idle]["top_exit_reasons"][:2], g2[busy].get("exits_why")))
ok = True
if order != [busy, idle]:
    print("FAIL: the busy guest is not ranked first by CPU"); ok = False
# CPU 0 is shared with whatever else runs on the host: a margin, not 100 %.
if not (g2[busy]["cpu_pct"] > 10 and g2[busy]["cpu_pct"] > 5 * g2[idle]["cpu_pct"]):
    print("FAIL: the busy guest does not stand out by CPU"); ok = False
if not g2[idle]["steal_pct"] > 0:
    print("FAIL: no steal on the idle guest sharing the busy one's CPU"); ok = False
if not (g2[idle]["exits"] > g1[idle]["exits"] and g2[idle]["exits_per_s"] > 0):
    print("FAIL: the idle KVM guest's exits do not rise"); ok = False
if g2[idle].get("exits_source") != "qmp" or g2[busy]["exits"] is not None:
    print("FAIL: exits should come from QMP for the KVM guest, none for TCG"); ok = False
if g2[idle]["vcpus"] != 1 or not g2[idle]["vcpu"][0]["tid"]:
    print("FAIL: the idle guest's vCPU thread was not found"); ok = False
if g2[busy]["hw_counters"] is not None or not g2[busy]["hw_why"]:
    print("FAIL: hardware counters should say why they are missing"); ok = False
sys.exit(0 if ok else 1)
EOF

# ---- 2: the full-screen view in tmux -----------------------------------------
screen() { tmux -L "$TMUX_SOCK" capture-pane -p -t top; }
keys() { tmux -L "$TMUX_SOCK" send-keys -t top "$@"; }
row() {	# row NAME: line number of NAME's row on screen, or 0
	screen | grep -n "^.\{0,2\}$1 " | head -1 | cut -d: -f1 | grep . || echo 0
}
wait_screen() {	# wait_screen SECONDS PATTERN
	for _ in $(seq $(( $1 * 5 ))); do
		screen | grep -q -- "$2" && return 0
		sleep 0.2
	done
	return 1
}
tmux -L "$TMUX_SOCK" new-session -d -s top -x 110 -y 40 \
	"TERM=xterm $(realpath "$OPVM") top --no-libvirt -f $P- -d 1 --profile-seconds 6 \
	 --guest-root $(realpath "$IMG/root") --system-map $(realpath "$IMG/System.map") \
	 --session-base $T; echo EXITED; sleep 30" || fail "cannot start tmux"
wait_screen 10 "$IDLE" || { screen; fail "no guest rows on the screen"; }
sleep 3
screen | tee "$T/screen1.txt"
rb=$(row "$BUSY") ri=$(row "$IDLE")
echo "RESULT top screen: sort cpu: busy on line $rb, idle on line $ri"
[ "$rb" -gt 0 ] && [ "$ri" -gt "$rb" ] || fail "sort by CPU does not put the busy guest first"
grep -q "sort: cpu" "$T/screen1.txt" || fail "the header does not show the sort key"
keys n
wait_screen 5 "sort: name" || fail "the n key did not sort by name"
rb=$(row "$BUSY") ri=$(row "$IDLE")
echo "RESULT top screen: sort name: busy on line $rb, idle on line $ri"
[ "$ri" -gt 0 ] && [ "$rb" -gt "$ri" ] || { screen; fail "sort by name does not put $IDLE first"; }

# ---- 3: p profiles the selected guest ----------------------------------------
keys c
wait_screen 5 "sort: cpu" || fail "the c key did not sort by CPU"
keys Up Up Up
keys p
wait_screen 10 "profiling $BUSY" || { screen; fail "the p key did not start profiling $BUSY"; }
wait_screen 60 "top symbols of $BUSY" || { screen; cat "$T"/opvm-top.*/attach.log; fail "no symbols"; }
screen | tee "$T/screen2.txt"
top_sym=$(sed -n "/top symbols of $BUSY/{n;p}" "$T/screen2.txt" | awk '{print $2}')
echo "RESULT top screen: p key, top symbol of $BUSY: $top_sym"
[ "$top_sym" = func_b ] || fail "the busy guest's top symbol is '$top_sym', not func_b"
keys q
wait_screen 5 EXITED || fail "q did not quit"
# opvm attach left the busy guest running.
python3 - "$T/busy.qmp" <<'EOF' || fail "the busy guest is not running after the profile"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile("rw")
f.readline()
for c in ("qmp_capabilities", "query-status"):
    f.write(json.dumps({"execute": c}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "event" not in r:
            break
print("status after the profile:", r["return"])
sys.exit(0 if r["return"]["running"] else 1)
EOF
echo PASS
