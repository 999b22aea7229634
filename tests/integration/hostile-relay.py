#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A rewriting relay for the org.opvm.0 channel: a hostile guest, made from
a real one.  Used by tests/integration/store-caps.sh and tests/soak.sh (not
run by the test runner itself).

    hostile-relay.py --upstream QEMU_CHAN --listen SOCK [--rename-hz N]
                     [--mmap-hz N] [--procs N --exit-hz N] [--hostile-names]
                     [--stats FILE]

opvm connects to SOCK (`opvm attach --qmp Q --channel SOCK`); the relay then
connects to QEMU's chardev socket (so the guest's relay sees a host arrive
and starts the session with HELLO and a full walk) and forwards every record
as it is, at record boundaries.  Between records it injects:

  --rename-hz N  COOKIE records that give every executable cookie it has
                 seen in PROC/EXEC records a new path, N per second in all
                 (each sample of a busy process then names a new image: the
                 cookie-rename flood);
  --mmap-hz N    MMAP records that map new file cookies over the known
                 processes' address space (a mapping storm), cookie ids from
                 a bounded window so the model's tables stay bounded.
  --procs N      once, 3 s after the first HELLO: N made-up processes, the
                 first two on one CR3 (a shared address space), the others
                 on their own;
  --exit-hz N    then N exits a second of those processes, each announced
                 again right after (the table stays N large): the exit
                 storm after a shared CR3;
  --fetch-lies N  after the first SYNC, every 2 s until N are out: a COOKIE
                 whose path climbs out of any directory ("/../../../tmp/
                 opvm-escape-K") and an MMAP of it over the first process
                 called cpuloop's text, so its samples make the host ask
                 for that image; the host's FETCH for it is not passed on
                 but answered with a lie, in turn: another ELF (a build-id
                 mismatch), 64 KiB of junk (not an ELF), a 2 GiB file
                 (FILE_DATA at consecutive offsets until --lie-stream-mb MiB
                 went out, default 64, then FILE_END claiming 2 GiB), and, for the 4th, whose
                 build-id is the one of this Python's executable, that
                 executable itself (accepted: under its build-id, never its
                 path).  Requests for real images, and for any image's
                 debug file (OPVM_FETCH_F_DEBUG), go to the guest.
  --ksyms-lie D  in the kernel's own KSYMS records (no module), the
                 entries of _text and of HELLO's anchor symbol moved by D
                 bytes (the rest left true): a kallsyms that moves the
                 KASLR slide away from opvm.ko's HELLO, so that with its
                 slide kernel samples would take other names;
  --hostile-names  once, with --procs: a process whose comm holds a newline,
                 a tab and an escape sequence, every executable cookie
                 renamed to a path with a newline and a tab planting a fake
                 report row, and a LOST record claiming 2^64 - 1 records.

Injected records reuse the last sequence number seen (the decoder counts
them, it does not trust them).  --stats FILE gets "renames=N mmaps=N
records=N" at every second and at exit (SIGTERM).
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import time

MAGIC = 0x564F
HDR = struct.Struct("<HHIII")
REC_HELLO, REC_LOST, REC_PROC, REC_EXEC, REC_EXIT, REC_COOKIE, REC_MMAP = 1, 2, 3, 4, 5, 8, 9
REC_SYNC, REC_FILE_DATA, REC_FILE_END, REQ_FETCH = 13, 16, 17, 64
F_DEBUG = 0x01				# OPVM_FETCH_F_DEBUG
REC_KSYMS = 14
MODNAME_LEN = 56			# OPVM_MODNAME_LEN
FETCH = struct.Struct("<IBBHQQ32s")	# after the header
CHUNK = 8192 - 32
BLOCK_MB = 64		# the huge file's block, made once, sent again
PROC = struct.Struct("<IIQQ16s")
EXIT = struct.Struct("<II")
FAKE_TGID = 0x40000000			# made-up processes: far from real pids
FAKE_CR3 = 0x7000000000			# and their address spaces
PLANT = b"/bin/evil\n99999999 99.9999 planted\trow"
COOKIE = struct.Struct("<Q32sBBHI")	# after the header
MMAP = struct.Struct("<IIQQQQ")
stop = False


def on_term(sig, frm):
    global stop
    stop = True


def record(rtype, seq, body):
    ln = HDR.size + len(body)
    pad = (-ln) % 8
    return HDR.pack(MAGIC, rtype, ln + pad, seq, 0) + body + b"\0" * pad


def build_id(path):
    """The GNU build-id of an ELF64 file, from its PT_NOTE segments."""
    with open(path, "rb") as f:
        data = f.read()
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        ptype, _, off, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if ptype != 4:
            continue
        p, end = off, off + filesz
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = p + 12
            desc = name + ((namesz + 3) & ~3)
            if ntype == 3 and data[name:name + 3] == b"GNU":
                return data[desc:desc + descsz], data
            p = desc + ((descsz + 3) & ~3)
    return None, data


def ksyms_lie(rec, names, delta):
    """rec (a KSYMS record) with the entries named in names moved by delta,
    if it is the kernel's own (no module); the number moved."""
    if len(rec) < 24 + MODNAME_LEN or rec[24] != 0:
        return 0
    nbytes, = struct.unpack_from("<H", rec, 20)
    p, end, moved = 24 + MODNAME_LEN, min(24 + MODNAME_LEN + nbytes, len(rec)), 0
    while p + 10 <= end:
        addr, _, nlen = struct.unpack_from("<QBB", rec, p)
        if bytes(rec[p + 10:p + 10 + nlen]) in names:
            struct.pack_into("<Q", rec, p, (addr + delta) & (2 ** 64 - 1))
            moved += 1
        p += 10 + nlen
    return moved


def lie(kind, req, own, stream_mb):
    """The records answering request req with lie number kind."""
    out = []
    def send(payload, size=None):
        for off in range(0, len(payload), CHUNK):
            piece = payload[off:off + CHUNK]
            out.append(record(REC_FILE_DATA, 0, struct.pack("<IIQ", req, len(piece), off) + piece))
        out.append(record(REC_FILE_END, 0, struct.pack("<iiQ", req, 0,
                                                       len(payload) if size is None else size)))
    if kind == 0:
        send(own)			# a real ELF, another build-id
    elif kind == 1:
        send(b"\x7fELF but not really " * 3000)
    elif kind == 2:
        # one block of the stream: send_stream() sends it again and again
        junk = b"\xa5" * CHUNK
        for i in range(min(stream_mb, BLOCK_MB) * 1024 * 1024 // CHUNK):
            out.append(record(REC_FILE_DATA, 0, struct.pack("<IIQ", req, CHUNK, i * CHUNK) + junk))
    else:
        send(own)			# the build-id asked for: accepted
    return out


def send_stream(sock, block, rid, stream_mb):
    """The huge file: stream_mb MiB of FILE_DATA at consecutive offsets,
    one block (made before the session) sent again with its request id and
    offsets rewritten, then a FILE_END claiming 2 GiB."""
    per = len(block) // 8192		# records of 8192 bytes, CHUNK data each
    base = 0
    left = stream_mb * 1024 * 1024 // CHUNK
    while left > 0:
        k = min(per, left)
        for i in range(k):
            struct.pack_into("<IIQ", block, i * 8192 + 16, rid, CHUNK, (base + i) * CHUNK)
        sock.sendall(memoryview(block)[:k * 8192])
        base += k
        left -= k
    sock.sendall(record(REC_FILE_END, 0, struct.pack("<iiQ", rid, 0, 2 << 30)))


def connect(path, deadline):
    while time.time() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            time.sleep(0.1)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--listen", required=True)
    ap.add_argument("--rename-hz", type=float, default=0)
    ap.add_argument("--mmap-hz", type=float, default=0)
    ap.add_argument("--procs", type=int, default=0)
    ap.add_argument("--exit-hz", type=float, default=0)
    ap.add_argument("--hostile-names", action="store_true")
    ap.add_argument("--fetch-lies", type=int, default=0)
    ap.add_argument("--lie-stream-mb", type=int, default=64)
    ap.add_argument("--ksyms-lie", type=lambda v: int(v, 0), default=0)
    ap.add_argument("--stats")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    n = {"renames": 0, "mmaps": 0, "records": 0, "procs": 0, "exits": 0,
         "cookies": 0, "lies": 0, "passed": 0, "ksyms_moved": 0}
    own_bid, own = build_id(os.path.realpath(sys.executable))
    lie_bids = {}		# build-id -> lie number
    # Built here, not while opvm samples: the relay's own CPU must not be
    # what slows the sampler down on a small host.
    # The listening socket comes after it: the test starts opvm as soon as
    # the socket exists.
    big = bytearray(b"".join(lie(2, 0, own, a.lie_stream_mb))) if a.fetch_lies else None
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if os.path.exists(a.listen):
        os.unlink(a.listen)
    ls.bind(a.listen)
    ls.listen(1)
    exes = []		# executable cookie ids, newest last (at most 64)
    procs = []		# tgids with an address space (at most 256)
    seq = 0
    gen = 0
    last_stats = 0.0

    def write_stats():
        if a.stats:
            with open(a.stats + ".tmp", "w") as f:
                f.write("renames=%d mmaps=%d records=%d procs=%d exits=%d cookies=%d "
                        "lies=%d passed=%d ksyms_moved=%d\n"
                        % (n["renames"], n["mmaps"], n["records"], n["procs"], n["exits"],
                           n["cookies"], n["lies"], n["passed"], n["ksyms_moved"]))
            os.replace(a.stats + ".tmp", a.stats)

    while not stop:
        r, _, _ = select.select([ls], [], [], 0.2)
        if not r:
            continue
        down, _ = ls.accept()
        up = connect(a.upstream, time.time() + 30)
        if not up:
            down.close()
            continue
        buf = b""
        t_rename = t_mmap = t_exit = time.time()
        t_hello = None		# first HELLO of this connection
        anchor = b"_text"	# HELLO's anchor symbol
        storm = False		# --procs sent
        t_sync = None		# first SYNC: the walk is over
        cpuloop = None		# its tgid and exe cookie
        text = None		# its text MMAP record's fields
        dbuf = b""
        # The rate injections are paced by this timeout; without them (the
        # fetch lies come seconds apart) the relay sleeps up to 0.2 s and
        # takes no CPU from the guest.
        injects = a.rename_hz or a.mmap_hz or a.procs or a.exit_hz
        poll_s = 0.001 if injects else 0.2
        while not stop:
            r, _, _ = select.select([up, down], [], [], poll_s)
            if down in r:
                d = down.recv(65536)
                if not d:
                    break
                dbuf += d
                fwd = []
                while len(dbuf) >= HDR.size:
                    magic, rtype, ln, _, _ = HDR.unpack_from(dbuf)
                    if magic != MAGIC or ln < HDR.size or len(dbuf) < ln:
                        if magic != MAGIC:
                            fwd.append(dbuf)
                            dbuf = b""
                        break
                    req, dbuf = dbuf[:ln], dbuf[ln:]
                    if rtype == REQ_FETCH and ln >= HDR.size + FETCH.size:
                        rid, blen, flags, _, _, _, bid = FETCH.unpack_from(req, HDR.size)
                        # a debug file's request goes on to the guest's
                        # relay (it has none for a made-up build-id)
                        kind = None if flags & F_DEBUG else lie_bids.get(bid[:blen])
                        if kind == 2:
                            send_stream(down, big, rid, a.lie_stream_mb)
                            n["lies"] += 1
                            continue
                        if kind is not None:
                            down.sendall(b"".join(lie(kind, rid, own, a.lie_stream_mb)))
                            n["lies"] += 1
                            continue
                        n["passed"] += 1
                    fwd.append(req)
                if fwd:
                    up.sendall(b"".join(fwd))
            if up in r:
                d = up.recv(65536)
                if not d:
                    break
                buf += d
                out = []
                while len(buf) >= HDR.size:
                    magic, rtype, ln, rseq, _ = HDR.unpack_from(buf)
                    if magic != MAGIC or ln < HDR.size or ln > 65536:
                        out.append(buf)	# lost framing: pass it on as it is
                        buf = b""
                        break
                    if len(buf) < ln:
                        break
                    rec, buf = buf[:ln], buf[ln:]
                    seq = rseq
                    n["records"] += 1
                    if rtype == REC_HELLO and t_hello is None:
                        t_hello = time.time()
                    if rtype == REC_HELLO and ln >= 120:
                        anchor = bytes(rec[56:120]).split(b"\0")[0]
                    if rtype == REC_KSYMS and a.ksyms_lie:
                        rec = bytearray(rec)
                        n["ksyms_moved"] += ksyms_lie(rec, (b"_text", anchor), a.ksyms_lie)
                        rec = bytes(rec)
                    if rtype == REC_SYNC and t_sync is None:
                        t_sync = time.time()
                    if rtype in (REC_PROC, REC_EXEC) and ln >= 56 and cpuloop is None:
                        tgid, _, _, exe, comm = PROC.unpack_from(rec, 16)
                        if comm.rstrip(b"\0") == b"cpuloop" and exe:
                            cpuloop = (tgid, exe)
                    if rtype == REC_MMAP and cpuloop and text is None:
                        f = MMAP.unpack_from(rec, 16)
                        if f[0] == cpuloop[0] and f[5] == cpuloop[1] and f[1] & 4:
                            text = f
                    if rtype in (REC_PROC, REC_EXEC) and ln >= 40:
                        tgid, _, cr3, exe = struct.unpack_from("<IIQQ", rec, 16)
                        if exe and exe not in exes:
                            exes.append(exe)
                            del exes[:-64]
                        if cr3 and tgid not in procs:
                            procs.append(tgid)
                            del procs[:-256]
                    out.append(rec)
                if out:
                    down.sendall(b"".join(out))
            now = time.time()
            inj = []
            if a.rename_hz and exes and not buf:
                k = min(int((now - t_rename) * a.rename_hz), 1000)
                for _ in range(k):
                    gen += 1
                    cid = exes[gen % len(exes)]
                    path = b"/hostile/renamed-%d/exe" % gen
                    inj.append(record(REC_COOKIE, seq, COOKIE.pack(cid, b"", 0, 0, len(path), 0) + path))
                    n["renames"] += 1
                if k:
                    t_rename = now
            if a.mmap_hz and procs and not buf:
                k = min(int((now - t_mmap) * a.mmap_hz), 1000)
                for _ in range(k):
                    gen += 1
                    cid = 0x4000000 + gen % 4096
                    path = b"/hostile/lib-%d.so" % (gen % 4096)
                    inj.append(record(REC_COOKIE, seq, COOKIE.pack(cid, b"", 0, 0, len(path), 0) + path))
                    start = 0x10000000 + (gen % 2048) * 0x10000
                    inj.append(record(REC_MMAP, seq, MMAP.pack(procs[gen % len(procs)], 5, start,
                                                               start + 0x8000, 0, cid)))
                    n["mmaps"] += 1
                if k:
                    t_mmap = now
            if (a.fetch_lies and text and t_sync and n["cookies"] < a.fetch_lies and not buf
                    and now - t_sync > 2 * (n["cookies"] + 1)):
                k = n["cookies"]
                bid = own_bid if k % 4 == 3 else os.urandom(20)
                lie_bids[bid] = k % 4
                cid = 0x5000000 + k
                path = b"/../../../tmp/opvm-escape-%d" % k
                inj.append(record(REC_COOKIE, seq, COOKIE.pack(cid, bid, len(bid), 0, len(path), 0)
                                  + path))
                inj.append(record(REC_MMAP, seq, MMAP.pack(text[0], text[1], text[2], text[3],
                                                           text[4], cid)))
                n["cookies"] += 1
            if a.procs and not storm and t_hello and now - t_hello > 3 and not buf:
                storm = True
                for i in range(a.procs):
                    cr3 = FAKE_CR3 + (i if i else 1) * 0x2000	# 0 and 1 share
                    inj.append(record(REC_PROC, seq, PROC.pack(FAKE_TGID + i, 1, cr3, 0, b"fake")))
                    n["procs"] += 1
                if a.hostile_names:
                    inj.append(record(REC_PROC, seq, PROC.pack(FAKE_TGID - 1, 1, FAKE_CR3 - 0x2000,
                                                               exes[0] if exes else 0,
                                                               b"x\ny\tz\x1b[2J")))
                    for cid in exes:
                        inj.append(record(REC_COOKIE, seq, COOKIE.pack(cid, b"", 0, 0, len(PLANT), 0)
                                          + PLANT))
                    inj.append(record(REC_LOST, seq, struct.pack("<Q", (1 << 64) - 1)))
                t_exit = now
            if storm and a.exit_hz and a.procs > 2 and not buf:
                k = min(int((now - t_exit) * a.exit_hz), 5000)
                for _ in range(k):
                    gen += 1
                    i = 2 + gen % (a.procs - 2)
                    inj.append(record(REC_EXIT, seq, EXIT.pack(FAKE_TGID + i, FAKE_TGID + i)))
                    inj.append(record(REC_PROC, seq, PROC.pack(FAKE_TGID + i, 1, FAKE_CR3 + i * 0x2000,
                                                               0, b"fake")))
                    n["exits"] += 1
                if k:
                    t_exit = now
            if inj:
                down.sendall(b"".join(inj))
            if now - last_stats > 1:
                write_stats()
                last_stats = now
        up.close()
        down.close()
    write_stats()
    ls.close()
    os.unlink(a.listen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
