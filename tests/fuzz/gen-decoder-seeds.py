#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes opvm channel streams (guest-kmod/opvm_proto.h, docs/protocol.md).

    gen-decoder-seeds.py --seeds DIR    fuzz seeds for tests/fuzz/fuzz-decoder.c
                                        (2-byte split seed + stream)
    gen-decoder-seeds.py --streams DIR  plain streams for the integration test

Every field is packed little-endian by hand from the header's layout, so the
seeds also check that the C structs and the written spec agree.

tests/fuzz/corpus/decoder/seed-real-guest is not written here: it is the
first 143 records (8184 bytes) opvm.ko sent from the test image booted with
opvm.workload=libcmix:1+forker:5, saved by `opvm channel-dump --raw-out`
and cut at a record boundary, behind the same 2-byte split seed.
"""
import os
import struct
import sys

MAGIC = 0x564F
VERSION = 1
(HELLO, LOST, PROC, EXEC, PROC_EXIT, THREAD, THREAD_EXIT, COOKIE, MMAP,
 MUNMAP, MODULE, MODULE_FREE, SYNC, KSYMS, KSYMS_END, FILE_DATA,
 FILE_END, CGROUP) = range(1, 19)


class Stream:
    def __init__(self):
        self.data = bytearray()
        self.seq = 0

    def rec(self, rtype, body, seq=None, length=None):
        total = 16 + len(body)
        total = (total + 7) & ~7
        body = body + b"\0" * (total - 16 - len(body))
        if seq is None:
            seq = self.seq
            self.seq += 1
        hdr = struct.pack("<HHII I".replace(" ", ""), MAGIC, rtype,
                          total if length is None else length, seq, 0)
        self.data += hdr + body
        return self

    def hello(self, version=VERSION, cpus=2, release=b"6.1.0-56-amd64",
              anchor=b"printk", switch=None):
        """switch: (pa, stride, entries, tsc_khz) for the ring tail."""
        self.seq = 0
        body = struct.pack("<IIQIIQQ64s65s7x", version, cpus, 0x2a45000, 24, 0,
                           0xffffffff8a0d3a80, 0xffffffff89000000,
                           anchor, release)
        assert len(body) == 176
        if switch is not None:
            body += struct.pack("<QIIII", *switch, 0)
        return self.rec(HELLO, body)

    def proc(self, tgid, ppid, cr3, exe, comm, rtype=PROC):
        return self.rec(rtype, struct.pack("<IIQQ16s", tgid, ppid, cr3, exe, comm))

    def exit(self, tid, tgid, rtype=PROC_EXIT):
        return self.rec(rtype, struct.pack("<II", tid, tgid))

    def thread(self, tid, tgid, comm):
        return self.rec(THREAD, struct.pack("<II16s", tid, tgid, comm))

    def cookie(self, cid, path, build_id=b"", path_len=None):
        body = struct.pack("<Q32sBBHI", cid, build_id, len(build_id), 0,
                           len(path) if path_len is None else path_len, 0)
        return self.rec(COOKIE, body + path)

    def mmap(self, tgid, start, end, pgoff, cookie, prot=5):
        return self.rec(MMAP, struct.pack("<IIQQQQ", tgid, prot, start, end,
                                          pgoff, cookie))

    def munmap(self, tgid, start, end):
        return self.rec(MUNMAP, struct.pack("<IIQQ", tgid, 0, start, end))

    def module(self, name, base, size, rtype=MODULE):
        return self.rec(rtype, struct.pack("<QQ56s", base, size, name))

    def sync(self, procs, mods):
        return self.rec(SYNC, struct.pack("<QQ", procs, mods))

    def lost(self, count):
        return self.rec(LOST, struct.pack("<Q", count))

    def ksyms(self, module, entries, nbytes=None):
        """entries: (addr, type letter, name) or raw bytes."""
        body = b"".join(e if isinstance(e, bytes) else
                        struct.pack("<Qcb", e[0], e[1], len(e[2])) + e[2]
                        for e in entries)
        head = struct.pack("<IHH56s", len(entries),
                           len(body) if nbytes is None else nbytes, 0, module)
        return self.rec(KSYMS, head + body)

    def ksyms_end(self, nr, flags=0):
        return self.rec(KSYMS_END, struct.pack("<QII", nr, flags, 0))

    def file_data(self, req, offset, data, nbytes=None):
        return self.rec(FILE_DATA, struct.pack("<IIQ", req, len(data) if nbytes is None
                                               else nbytes, offset) + data)

    def file_end(self, req, status, size):
        return self.rec(FILE_END, struct.pack("<iiQ", req, status, size))

    def cgroup(self, tgid, path, path_len=None, flags=0):
        n = len(path) if path_len is None else path_len
        return self.rec(CGROUP, struct.pack("<IHHQ", tgid, n, flags, 0) + path)

    def raw(self, b):
        self.data += b
        return self


LIBC = b"/lib/x86_64-linux-gnu/libc.so.6"
BID = bytes(range(0xab, 0xab + 20))


def session():
    s = Stream().hello()
    s.proc(1, 0, 0x1a2b000, 7, b"init")
    s.cookie(7, b"/sbin/init", BID)
    s.cookie(3, LIBC, BID[::-1])
    s.mmap(1, 0x55d0c0000000, 0x55d0c0010000, 0, 7)
    s.mmap(1, 0x7f1234560000, 0x7f12346e0000, 0x28000, 3)
    s.proc(42, 1, 0x3c4d000, 7, b"sh")
    s.thread(43, 42, b"sh-worker")
    s.module(b"virtio_console", 0xffffffffc0200000, 0x6000)
    s.module(b"opvm", 0xffffffffc0300000, 0x3000)
    s.sync(2, 2)
    s.proc(42, 1, 0x3c4e000, 3, b"busybox", rtype=EXEC)
    s.mmap(42, 0x7f0000000000, 0x7f0000010000, 0, 3)
    s.munmap(42, 0x7f0000000000, 0x7f0000008000)
    s.lost(4)
    s.exit(43, 42, rtype=THREAD_EXIT)
    s.module(b"opvm", 0xffffffffc0300000, 0x3000, rtype=MODULE_FREE)
    s.exit(42, 42)
    return s


def streams():
    out = {}
    out["session"] = session().data
    out["hello"] = Stream().hello().data
    # garbage, a foreign version, a bad cookie, an unknown type, then good
    s = Stream().raw(b"OVxx\x4f garbage \x00\x4f\x56").hello()
    s.proc(5, 1, 0x5000, 0, b"a")
    s.rec(99, b"\1" * 8)
    s.cookie(9, b"/x", path_len=500)
    s.hello(version=2).proc(6, 1, 0x6000, 0, b"v2").hello()
    s.seq += 3
    s.proc(7, 1, 0x7000, 0, b"gap")
    out["hostile"] = s.data
    # hostile strings
    s = Stream().hello(release=b"../../\x1b[31m" + b"A" * 53, anchor=b"x" * 64)
    s.proc(8, 1, 0x8000, 0, b"\x1b]0;pwned\x07\n\r\"\\\xff")
    s.cookie(1, b"../../../etc/shadow\n\x1b[2J\x7f\"quoted\"", b"\x01")
    s.cookie(2, b"/" + b"p" * 4095)
    out["strings"] = s.data
    s = Stream().proc(9, 1, 0x9000, 0, b"early").mmap(9, 0x1000, 0x2000, 0, 4)
    s.exit(10, 10).hello().mmap(11, 0x1000, 0x2000, 0, 5).lost(2**64 - 1)
    out["order"] = s.data
    # HELLO with the switch-ring tail: good, then out of bounds
    s = Stream().hello(switch=(0x10700000, 163904, 4096, 2594322))
    s.proc(12, 1, 0xc000, 0, b"sw")
    s.hello(switch=(2**64 - 4096, 163904, 4096, 1)).hello(switch=(0x1000, 64, 3, 0))
    out["switch"] = s.data
    # kernel symbols: vmlinux, a module, hostile names and lengths
    s = Stream().hello()
    s.ksyms(b"", [(0xffffffff81000000, b"T", b"_text"),
                  (0xffffffff81001000, b"t", b"do_one_initcall.cold"),
                  (0, b"T", b"hidden"), (0xffffffff81002000, b"D", b"data")])
    s.ksyms(b"virtio_console", [(0xffffffffc0200000, b"t", b"port_fops_write")])
    s.ksyms(b"x] [y\n", [(0xffffffffc0300000, b"t", b"a b\t\x1b[2J\n]")])
    s.ksyms(b"", [struct.pack("<Qcb", 0xffffffff81003000, b"T", 100) + b"short"])
    s.ksyms(b"", [(0xffffffff81004000, b"T", b"x")], nbytes=4000)
    s.ksyms_end(7, 1)
    out["ksyms"] = s.data
    # a fetched file (request 1 in fuzz-decoder): data, a gap, a lie, ends
    s = Stream().hello()
    s.file_data(1, 0, b"\x7fELF" + b"\0" * 60).file_data(1, 64, b"x" * 8000)
    s.file_data(2, 0, b"stray").file_data(1, 1 << 31, b"jump")
    s.file_data(1, 8064, b"y", nbytes=9000).file_end(1, 0, 8064)
    s.file_end(1, -116, 0).file_end(7, 0, 2 << 30)
    out["file"] = s.data
    # cgroups: Kubernetes' forms, the longest path, lies about lengths
    uid = b"2c0a4b1e_93f5_4b57_8e0e_1d2c3b4a5f60"
    cid = b"0123456789abcdef" * 4
    s = Stream().hello().proc(20, 1, 0x14000, 0, b"app").proc(21, 1, 0x15000, 0, b"b")
    s.cgroup(20, b"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid +
             b".slice/cri-containerd-" + cid + b".scope")
    s.cgroup(21, b"/kubepods/burstable/pod" + uid.replace(b"_", b"-") + b"/" + cid)
    s.cgroup(21, b"/" + b"c" * 1023).cgroup(20, b"/x", path_len=1025)
    s.cgroup(20, b"/x", path_len=40).cgroup(99, b"/docker/" + cid)
    out["cgroup"] = s.data
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("--seeds", "--streams"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    for i, (name, data) in enumerate(sorted(streams().items())):
        if sys.argv[1] == "--seeds":
            # split seed: varies how the fuzz target chops the stream
            data = struct.pack("<H", 0x9e37 * (i + 1) & 0xffff) + data
            name = "seed-" + name
        with open(os.path.join(sys.argv[2], name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
