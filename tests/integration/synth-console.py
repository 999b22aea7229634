#!/usr/bin/env python3
# Drives the synthetic guest (tests/guests/) for the perf-backend tests:
# connects to its console socket, waits for it to boot, starts `opvm attach`,
# waits for the session's guest tree, lets the guest go (one byte), and
# waits for it to finish and opvm to exit.
#   synth-console.py DIR BOOT_SECS GUEST_TREE -- OPVM ATTACH-ARGS...
# DIR holds the console socket "con"; the console goes to DIR/console.log,
# opvm's output to DIR/attach.out.  If DIR/chardev.cmd exists, the command
# in it (one argv per line) is run while opvm samples and its output kept
# in DIR/chardev.txt.  Exit 0 if the guest finished and opvm exited 0.
import os, socket, subprocess, sys, time

T, boot_secs, tree = sys.argv[1], float(sys.argv[2]), sys.argv[3]
cmd = sys.argv[sys.argv.index("--") + 1:]
for _ in range(200):
    try:
        c = socket.socket(socket.AF_UNIX)
        c.connect(T + "/con")
        break
    except OSError:
        time.sleep(0.1)
else:
    print("FAIL: no console socket")
    sys.exit(1)
log, buf = open(T + "/console.log", "wb"), b""


def read_until(what, secs):
    global buf
    c.settimeout(0.2)
    end = time.time() + secs
    while what not in buf and time.time() < end:
        try:
            d = c.recv(4096)
        except socket.timeout:
            continue
        if not d:
            break
        buf += d
        log.write(d)
        log.flush()
    return what in buf


if not read_until(b"waiting for a byte", boot_secs):
    print("FAIL: the guest did not boot")
    sys.exit(1)
p = subprocess.Popen(cmd, stdout=open(T + "/attach.out", "w"), stderr=subprocess.STDOUT)
limit = time.time() + 30
while not os.path.isdir(tree) and p.poll() is None and time.time() < limit:
    time.sleep(0.05)
time.sleep(0.3)
if os.path.exists(T + "/chardev.cmd"):
    argv = open(T + "/chardev.cmd").read().splitlines()
    out = subprocess.run(argv, capture_output=True, text=True).stdout
    open(T + "/chardev.txt", "w").write(out)
c.sendall(b"g")
done = read_until(b"synthetic guest: done", 300)
rc = p.wait(timeout=60)
print(open(T + "/attach.out").read())
if not done:
    print("FAIL: the guest did not finish")
    sys.exit(1)
if rc != 0:
    print("FAIL: opvm attach exited with %d" % rc)
    sys.exit(1)
