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
#   stop-latency:   the part of it that is QEMU stopping its vCPUs: right
#                   after `opvm attach` exits (in the repetition left out
#                   of the overhead figure), a Python client on a fresh
#                   gdbstub times "\x03" + "qC" + "c" in one write up to
#                   the stop reply, median of 60, in us (an upper bound:
#                   Python's own socket calls are included)
# Prints exactly those three lines on stdout; details go to stderr.
# With QEMU_BENCH_CALLGRAPH (tests/bench/callgraph-bench.sh) attach runs
# with -g, the guest's RAM in a shared memfd, and one line comes out: =1
# guest-overhead-callgraph; =fp callgraph-cost-fp (the walk's own host
# time per sample, as the sampler measured it); =pread the same with RAM as
# QEMU's default anonymous memory, read through /proc/PID/mem
# (callgraph-cost-fp-pread); =dwarf callgraph-cost-dwarf.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
mk_tmp qemu-bench
ITERS=${QEMU_BENCH_ITERS:-300000000}
REPS=${QEMU_BENCH_REPS:-14}
RATE=${QEMU_BENCH_RATE:-}
CG=${QEMU_BENCH_CALLGRAPH:-0}

python3 - "$OPVM" "$IMG" "$T" "$ITERS" "$REPS" "$RATE" "$CG" <<'EOF'
import json, os, re, signal, socket, statistics, subprocess, sys, time

opvm, img, tmp, iters, reps, rate, cg = sys.argv[1:8]
cg = {"0": "", "1": "memfd"}.get(cg, cg)   # or "fp", "pread", "dwarf"
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
     "-kernel", img + "/vmlinuz", "-initrd", img + "/initramfs.cpio.gz"] +
    # -g: the guest's RAM in a shared memfd, as opvm run -g boots guests,
    # so attach maps it and walks stacks without system calls
    (["-object", "memory-backend-memfd,id=ram0,size=512M,share=on",
      "-machine", "memory-backend=ram0"] if cg and cg != "pread" else []) + [
     "-append", "console=ttyS0 quiet tsc=reliable clocksource=tsc "
               "opvm.workload=cpuloop opvm.args=%s,%d" % (iters, reps)],
    stdout=log, stderr=log)
attach = None
stop_lat = []

def gdb_packet(body):
    return b"$%s#%02x" % (body, sum(body) & 0xff)

def measure_stop(n=60):
    """Times QEMU's all-stop: "\x03" (QEMU stops every vCPU, then sends a
    stop reply), "qC" and "c" in one write, as the sampler does, without
    the register reads.  QEMU 7.2 has no no-ack mode: every reply of its
    is acked by a "+" at the start of our next write (and with a running
    guest, whichever of "+" and "\x03" comes first stops it)."""
    q = connect(qmp)
    q.settimeout(5)
    qf = q.makefile("rw")
    def hmp(line):
        qf.write(json.dumps({"execute": "human-monitor-command",
                             "arguments": {"command-line": line}}) + "\n")
        qf.flush()
        while True:     # events (STOP, RESUME) come in between
            r = json.loads(qf.readline())
            if "return" in r or "error" in r:
                return r
    try:
        qf.readline()
        qf.write(json.dumps({"execute": "qmp_capabilities"}) + "\n"); qf.flush()
        while "return" not in json.loads(qf.readline()):
            pass
        gdb_path = tmp + "/gdb"
        r = hmp("gdbserver unix:%s,server=on,wait=off" % gdb_path)
        if "Waiting" not in str(r.get("return", "")):
            print("qemu-bench: no gdbstub for the stop latency: %s" % r, file=sys.stderr)
            return
        g = connect(gdb_path)  # QEMU stops the guest for a new gdb connection
        g.settimeout(2)
        g.sendall(gdb_packet(b"c"))
        for _ in range(n):
            time.sleep(0.001)
            got, t_stop = b"", None
            t0 = time.monotonic()
            g.sendall(b"+\x03" + gdb_packet(b"qC") + gdb_packet(b"c"))
            # Answers: the stop reply, "+" and "$QC..#xx" for qC, "+" for c.
            while not re.search(rb"\$QC[^#]*#..\+", got):
                d = g.recv(65536)
                if not d:
                    raise OSError("the gdbstub closed")
                got += d
                if t_stop is None and b"$T" in got:
                    t_stop = time.monotonic()
            if t_stop is not None:
                stop_lat.append((t_stop - t0) * 1e6)
        # No "+" for the last answer: with nothing left to ack, QEMU takes
        # any byte that reaches a running guest for a stop request.
        g.close()
        hmp("gdbserver none")
    except (OSError, ValueError) as e:
        print("qemu-bench: stop latency not measured: %s" % e, file=sys.stderr)
    finally:
        qf.close()
        q.close()

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
            if cg:
                args += ["-g", "--system-map", img + "/System.map"]
            if cg == "dwarf":
                args += ["--call-graph", "dwarf", "--guest-root", img + "/root"]
            attach = subprocess.Popen(args, stdout=open(tmp + "/attach.out", "w"),
                                      stderr=subprocess.STDOUT)
        if r == stop_after and attach:
            attach.send_signal(signal.SIGINT)
            attach.wait()
            if not cg:
                measure_stop()
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
if cg:
    out = open(tmp + "/attach.out").read().replace("\n    ", " ")
    m = re.search(r"call graphs: (\d+) stacks walked, ([\d.]+) callers .*?, ([\d.]+) us each", out)
    if not m:
        print("qemu-bench: attach -g did not say what the walks cost", file=sys.stderr)
        bye(1)
    if cg == "pread":
        print("callgraph-cost-fp-pread: %s us" % m.group(3))
        bye(0)
    if cg == "dwarf":
        # the sampler's walk and 8 KiB copy, and the collector's unwind
        dw = json.load(open(tmp + "/s/guests/bench/samples/current/session.json"))["dwarf_unwind"]
        print("qemu-bench: dwarf: %d unwinds, %.1f frames each, %.1f us each; walk+copy %s us"
              % (dw["unwinds"], dw["frames"] / max(dw["unwinds"], 1), dw["ns_avg"] / 1e3,
                 m.group(3)), file=sys.stderr)
        print("callgraph-cost-dwarf: %.1f us" % (float(m.group(3)) + dw["ns_avg"] / 1e3))
        bye(0)
    print("qemu-bench: %s stacks walked, %s us each" % (m.group(1), m.group(3)), file=sys.stderr)
    if cg == "fp":
        print("callgraph-cost-fp: %s us" % m.group(3))
    else:
        print("guest-overhead-callgraph: %.1f %%" % (100.0 * (mp / mb - 1.0)))
    bye(0)
print("guest-overhead: %.1f %%" % (100.0 * (mp / mb - 1.0)))
print("sample-cost: %.0f us" % (smp["cost_ns_avg"] / 1000.0))
if stop_lat:
    print("qemu-bench: stop latency over %d stops: min %.0f us, median %.0f us, max %.0f us" %
          (len(stop_lat), min(stop_lat), statistics.median(stop_lat), max(stop_lat)), file=sys.stderr)
    print("stop-latency: %.0f us" % statistics.median(stop_lat))
bye(0)
EOF
