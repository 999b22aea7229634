#!/usr/bin/env python3
# The console of one synthetic KVM guest (guest-mb-long.elf) for the
# continuous exporter's test: waits for it to boot, then for its sampler
# (the store's samples/ directory of that guest), lets it go (one byte),
# and keeps its console in DIR/console.log until killed.  DIR/state says
# how far it got: "noboot", "nosampler" or "running".
#   synth-kvm-guest.py DIR BOOT_SECS SAMPLES_GLOB
import glob, socket, sys, time

d, boot_secs, samples = sys.argv[1], float(sys.argv[2]), sys.argv[3]
state = lambda s: open(d + "/state", "w").write(s + "\n")
for _ in range(200):
    try:
        c = socket.socket(socket.AF_UNIX)
        c.connect(d + "/con")
        break
    except OSError:
        time.sleep(0.1)
else:
    state("noboot"); sys.exit(1)
log, buf = open(d + "/console.log", "wb"), b""
c.settimeout(0.2)
end = time.time() + boot_secs
while b"waiting for a byte" not in buf and time.time() < end:
    try:
        b = c.recv(4096)
    except socket.timeout:
        continue
    if not b:
        break
    buf += b; log.write(b); log.flush()
if b"waiting for a byte" not in buf:
    state("noboot"); sys.exit(1)
end = time.time() + 60
while not glob.glob(samples) and time.time() < end:
    time.sleep(0.1)
if not glob.glob(samples):
    state("nosampler"); sys.exit(1)
c.sendall(b"g")
state("running")
while True:
    try:
        b = c.recv(4096)
    except socket.timeout:
        continue
    if not b:
        break
    log.write(b); log.flush()
