#!/usr/bin/env python3
# Writes the seed of fuzz-introspect (tests/fuzz/corpus/introspect/): a
# small kallsyms table in the 6.1 layout and a VMCOREINFO text, in the
# target's input format (six u64 offsets, then the memory image), and a
# last 4 KiB holding a process's mm, a maple tree leaf with one executable
# file mapping, its file, dentries, mount and the ELF header with a
# build-id the mapping shows (fuzz-introspect.c's fixed offsets).
# With "modules": the seed of the module walk instead (seed-modules): the
# sixth offset is the list head, one struct module in Debian 12's 6.1
# layout behind it, its text and three symbols.
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
    while len(mem) % 256:
        mem += b"\0"
    mem += trailer(base + len(mem))
    hdr = struct.pack("<6Q", o["names"], o["num"], o["tt"], o["ti"], o["offs"], o["rb"])
    return hdr + mem

def trailer(va):
    t = bytearray(4096)
    def put(off, b):
        t[off:off + len(b)] = b
    q = lambda *v: struct.pack("<%dQ" % len(v), *v)
    # ELF header, one PT_NOTE at 0x200 with a GNU build-id
    put(0, b"\x7fELF\x02\x01\x01")
    put(32, q(64)); put(54, struct.pack("<HH", 56, 1))
    put(64, struct.pack("<I", 4)); put(72, q(0x200)); put(96, q(36))
    put(0x200, struct.pack("<III", 4, 20, 3) + b"GNU\0" + bytes(range(1, 21)))
    # a leaf (type 1): [0, 0x3fffff] empty, the VMA, then empty to the end
    put(0x400 + 8, q(0x3fffff, 0x400fff, 2**64 - 1))
    put(0x400 + 8 + 15 * 8, q(0, va + 0x500, 0))
    put(0x500, q(0x400000, 0x401000, 0, 0, 5, 0, va + 0x600))   # VMA
    put(0x600, q(va + 0x800 + 0x10, va + 0x780))                 # file: mnt, dentry
    put(0x700, q(va + 0x700) + struct.pack("<II", 0, 1) + q(va + 0x900, va + 0xa00))
    put(0x780, q(va + 0x700) + struct.pack("<II", 0, 4) + q(va + 0x902, va + 0xa08))
    put(0x800, q(va + 0x800, 0, va + 0x700))                      # mount, root "/"
    put(0x900, b"/\0prog\0")
    put(0xf00, q(1, 1, 0, va + 0x400 + (1 << 3) + 2))            # mm
    return bytes(t)

def modules():
    mod = 0xffffffffc0000000
    t = bytearray(0x1100)
    def put(off, b):
        t[off:off + len(b)] = b
    q = lambda *v: struct.pack("<%dQ" % len(v), *v)
    put(0x100, q(mod + 0x208, mod + 0x208))                # head
    put(0x208, q(mod + 0x100, mod + 0x100))                # list
    put(0x200 + 24, b"seedmod\0")
    put(0x200 + 320, q(mod + 0x1000) + struct.pack("<II", 0x100, 0x100))
    put(0x200 + 544, q(mod + 0x600))                       # kallsyms
    put(0x600, q(mod + 0x700) + struct.pack("<II", 3, 0) + q(mod + 0x800, mod + 0x900))
    put(0x700 + 24, struct.pack("<IBBH", 1, 0x12, 0, 1) + q(mod + 0x1000, 0x80))
    put(0x700 + 48, struct.pack("<IBBH", 10, 0x02, 0, 1) + q(mod + 0x1080, 0x80))
    put(0x800, b"\0seed_one\0seed_two\0")
    put(0x900, b"UTt")
    return struct.pack("<6Q", 0, 0, 0, 0, 0, 0x100) + bytes(t)

sys.stdout.buffer.write(modules() if sys.argv[1:] == ["modules"] else image())
