#!/bin/bash
# Fetching a guest binary by build-id (docs/protocol.md, FETCH) while the
# guest is sampled: the test image under QEMU TCG runs cpuloop from a copy
# with 50 MiB appended (workload bigcpuloop: the same code and build-id, a
# 51 MiB file), `opvm run` samples it at 100 Hz and, as soon as the copy
# has samples, fetches it into a fresh cache.  Every session.json rewrite
# (one a second) is read as it happens.
#   fetch-throughput:   bytes of the binaries fetched / the time from each
#                       request to its FILE_END, in MB/s (10^6 bytes)
#   fetch-sample-delay: how much lower the sampler's samples per second
#                       were in the sync intervals during which file data
#                       arrived than in the others, in % (0 when not lower),
#                       plus samples lost to a full ring, in % of all
# Prints exactly those two lines on stdout; details go to stderr.
. "$(dirname "$0")/../integration/qemu-common.bash"
need_qemu
mk_tmp fetch-bench
ITERS=${FETCH_BENCH_ITERS:-600000000}
REPS=${FETCH_BENCH_REPS:-16}	# long enough for the 51 MiB at 8 MiB/s after boot

python3 - "$OPVM" "$T" "$ITERS" "$REPS" <<'PY'
import json, os, subprocess, sys, time
opvm, tmp, iters, reps = sys.argv[1:5]
sess = tmp + "/s"
sj = sess + "/guests/guest/samples/current/session.json"
p = subprocess.Popen([opvm, "run", "--workload", "bigcpuloop:%s,%s" % (iters, reps),
                      "--fetch-cache", tmp + "/cache", "-F", "100", "-d", sess],
                     stdout=open(tmp + "/run.out", "w"), stderr=subprocess.STDOUT)
snaps, last = [], None
while p.poll() is None:
    try:
        st = os.stat(sj)
        if last != (st.st_mtime_ns, st.st_ino):
            last = (st.st_mtime_ns, st.st_ino)
            j = json.load(open(sj))
            snaps.append((j["duration_s"], j["sampler"]["samples"],
                          j["fetch"]["binaries"]["data_bytes"]))
    except (OSError, ValueError, KeyError):
        pass
    time.sleep(0.05)
if p.returncode:
    sys.stderr.write(open(tmp + "/run.out").read())
    sys.exit("fetch-bench: opvm run exited with %d" % p.returncode)
j = json.load(open(sj))
b, st = j["fetch"]["binaries"], j["stats"]
con = open(sess + "/guests/guest/console.log", errors="replace").read()
if "OPVM-TRUTH exit workload=bigcpuloop rc=0" not in con:
    sys.exit("fetch-bench: the workload did not finish")
big = max((os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp + "/cache") for f in fs),
          default=0)
if big < 50 << 20:
    sys.exit("fetch-bench: the 50 MiB binary was not fetched (largest cached: %d bytes; %s)"
             % (big, b))
during = [0.0, 0]
outside = [0.0, 0]
for (t0, s0, d0), (t1, s1, d1) in zip(snaps, snaps[1:]):
    acc = during if d1 > d0 else outside
    acc[0] += t1 - t0
    acc[1] += s1 - s0
rd = during[1] / during[0] if during[0] else 0
ro = outside[1] / outside[0] if outside[0] else 0
sys.stderr.write("fetch-bench: %d files, %d bytes in %d ms (largest %d bytes); samples/s "
                 "%.1f in %.1f s while data arrived, %.1f in %.1f s otherwise; %d of %d "
                 "samples lost to a full ring\n" % (b["files"], b["bytes"], b["elapsed_ms"],
                 big, rd, during[0], ro, outside[0], st["lost_overflow"], st["received"]))
if not during[0] or not outside[0]:
    sys.exit("fetch-bench: no sync interval %s the transfer" %
             ("during" if not during[0] else "outside"))
print("fetch-throughput: %.1f MB/s" % (b["bytes"] / 1e3 / max(b["elapsed_ms"], 1)))
print("fetch-sample-delay: %.1f %%" % (max(0.0, 100.0 * (ro - rd) / ro) +
                                       100.0 * st["lost_overflow"] / max(st["received"], 1)))
PY
