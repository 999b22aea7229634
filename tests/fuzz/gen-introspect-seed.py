#!/usr/bin/env python3
# Writes the seed of fuzz-introspect (tests/fuzz/corpus/introspect/): a
# small kallsyms table in the 6.1 layout and a VMCOREINFO text, in the
# target's input format (six u64 offsets, then the memory image).
import struct, sys

def image():
    syms = [("T_text", 0), ("Tstartup_64", 0), ("tfoo_bar", 0x100), ("Ddata", 0x200),
            ("T" + "y" * 150, 0x300)]
    base = 0xffffffff81000000
    idx, table = [], b""
    for t in range(256):
        idx.append(len(table))
        table += (bytes([t]) if t else b"") + b"\0"
    num = struct.pack("<I", len(syms)) + b"\0" * 4
    rb = struct.pack("<Q", base)
    ti = struct.pack("<256H", *idx)
    offs = b"".join(struct.pack("<i", -1 - a) for _, a in syms)
    names = b""
    for n, _ in syms:
        e = n.encode()
        names += (bytes([len(e)]) if len(e) < 0x80 else
                  bytes([0x80 | (len(e) & 0x7f), len(e) >> 7])) + e
    vmci = b"OSRELEASE=6.1.0-seed\nKERNELOFFSET=0\nNUMBER(phys_base)=-14680064\n\0"
    mem = vmci
    o = {}
    for name, blob in (("num", num), ("rb", rb), ("ti", ti), ("tt", table),
                       ("offs", offs), ("names", names)):
        while len(mem) % 8:
            mem += b"\0"
        o[name] = len(mem)
        mem += blob
    hdr = struct.pack("<6Q", o["names"], o["num"], o["tt"], o["ti"], o["offs"], o["rb"])
    return hdr + mem

sys.stdout.buffer.write(image())
