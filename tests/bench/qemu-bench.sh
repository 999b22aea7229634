#!/bin/bash
# Cost of sampling a QEMU (TCG) guest through the gdbstub, in one boot of
# the test image running cpuloop (a fixed CPU-bound loop, repeated):
#   guest-overhead: how much longer a repetition takes on the host's clock
#                   while `opvm attach` samples at the default rate, against
#                   repetitions before and after it in the same boot, in %.
#                   Each repetition's host wall time is divided by the
#                   guest's own timing of it: the guest clock stops while
#                   QEMU holds the guest stopped (so the ratio grows by the
#                   stopped time), while host scheduling noise from other
#                   load slows both clocks alike and cancels.  Medians.
#   sample-cost:    host time per stop / read (2 vCPUs + slots) / continue,
#                   as the sampler measured it, in us
# Prints exactly those two lines on stdout; details go to stderr.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
mk_tmp qemu-bench
ITERS=${QEMU_BENCH_ITERS:-300000000}
REPS=${QEMU_BENCH_REPS:-14}
RATE=${QEMU_BENCH_RATE:-}

python3 - "$OPVM" "$IMG" "$T" "$ITERS" "$REPS" "$RATE" <<'EOF'
import json, os, re, signal, socket, statistics, subprocess, sys, time

opvm, img, tmp, iters, reps, rate = sys.argv[1:7]
reps = int(reps)
qmp, chan, con = tmp + "/qmp", tmp + "/chan", tmp + "/con"
log = open(tmp + "/qemu.log", "w")
qemu = subprocess.Popen(
    ["qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-smp", "2", "-nodefaults",
     "-display", "none", "-S",
     "-qmp", "unix:%s,server=on,wait=off" % qmp,
     "-chardev", "socket,id=con0,path=%s,server=on,wait=off" % con, "-serial", "chardev:con0",
     "-device", "virtio-serial-pci,id=ser",
     "-chardev", "socket,id=opvm0,path=%s,server=on,wait=off" % chan,
     "-device", "virtserialport,bus=ser.0,chardev=opvm0,name=org.opvm.0",
     "-kernel", img + "/vmlinuz", "-initrd", img + "/initramfs.cpio.gz",
     "-append", "console=ttyS0 quiet tsc=reliable clocksource=tsc "
               "opvm.workload=cpuloop opvm.args=%s,%d" % (iters, reps)],
    stdout=log, stderr=log)
attach = None

def bye(code):
    for p in (attach, qemu):
        if p and p.poll() is None:
            p.kill()
            p.wait()
    sys.exit(code)

def connect(path):
    for _ in range(500):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            return s
        except OSError:
            time.sleep(0.02)
    print("qemu-bench: QEMU did not start (see %s/qemu.log)" % tmp, file=sys.stderr)
    bye(1)

c = connect(con)
q = connect(qmp)
qf = q.makefile("rw")
qf.readline()
for cmd in ("qmp_capabilities", "cont"):
    qf.write(json.dumps({"execute": cmd}) + "\n"); qf.flush()
    while "return" not in json.loads(qf.readline()):
        pass
qf.close()
q.close()   # QMP takes one client: opvm attach is next

times, gns = {}, {}
buf = b""
start_after, stop_after = 3, 3 + (reps - 6) // 2 + 1
deadline = time.time() + 600
while time.time() < deadline:
    c.settimeout(1.0)
    try:
        d = c.recv(4096)
    except socket.timeout:
        if qemu.poll() is not None:
            break
        continue
    if not d:
        break
    now = time.monotonic()
    buf += d
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        m = re.search(rb"OPVM-BENCH cpuloop rep=(\d+) ns=(\d+)", line)
        if not m:
            continue
        r = int(m.group(1))
        times[r] = now
        gns[r] = int(m.group(2))
        print("qemu-bench: rep %d at %.3f%s" % (r, now, " (sampling)" if attach else ""),
              file=sys.stderr)
        if r == start_after:
            args = [opvm, "attach", "--qmp", qmp, "--channel", chan, "--name", "bench",
                    "-d", tmp + "/s"]
            if rate:
                args += ["-F", rate]
            attach = subprocess.Popen(args, stdout=open(tmp + "/attach.out", "w"),
                                      stderr=subprocess.STDOUT)
        if r == stop_after and attach:
            attach.send_signal(signal.SIGINT)
            attach.wait()
    if len(times) >= reps:
        break
qemu.wait(timeout=60) if qemu.poll() is None and len(times) >= reps else None
if attach is None or len(times) < reps:
    print("qemu-bench: the guest printed %d of %d repetitions (see %s)" % (len(times), reps, tmp),
          file=sys.stderr)
    bye(1)
dur = {r: times[r] - times[r - 1] for r in times if r - 1 in times}
# Host wall time over the guest's own time for the same repetition: the
# guest clock stops while QEMU holds the guest stopped, and both clocks run
# on through host scheduling noise, which the ratio cancels.
ratio = {r: dur[r] / (gns[r] / 1e9) for r in dur if gns.get(r)}
# The repetition during which attach started or stopped is mixed: left out.
prof = [r for r in dur if start_after + 1 < r <= stop_after]
base = [r for r in dur if r <= start_after or r > stop_after + 1]
mp = statistics.median(ratio[r] for r in prof)
mb = statistics.median(ratio[r] for r in base)
print("qemu-bench: repetitions (host s / guest s): sampled %s, not sampled %s" %
      (["%.3f/%.3f" % (dur[r], gns[r] / 1e9) for r in prof],
       ["%.3f/%.3f" % (dur[r], gns[r] / 1e9) for r in base]), file=sys.stderr)
print("qemu-bench: raw wall-time medians: sampled %.3f s, not sampled %.3f s" %
      (statistics.median(dur[r] for r in prof), statistics.median(dur[r] for r in base)),
      file=sys.stderr)
sess = json.load(open(tmp + "/s/guests/bench/samples/current/session.json"))
smp = sess["sampler"]
print("qemu-bench: rate %s Hz, %d ticks, %d samples, %d throttled" %
      (sess.get("rate_hz"), smp["ticks"], smp["samples"], smp["throttled"]), file=sys.stderr)
print(open(tmp + "/attach.out").read(), file=sys.stderr)
print("guest-overhead: %.1f %%" % (100.0 * (mp / mb - 1.0)))
print("sample-cost: %.0f us" % (smp["cost_ns_avg"] / 1000.0))
bye(0)
EOF
