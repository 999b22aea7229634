#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# A seed for tests/fuzz/fuzz-memsyms.c: a small shared object (argv[1],
# e.g. /lib/x86_64-linux-gnu/libdl.so.2) laid out as ld.so maps it, each
# PT_LOAD at its address from BASE, the dynamic section's pointers
# relocated (the PLT's tables too), after the target's 16-byte header (no
# page absent, the first executable segment's page as the mapping's
# offset).  Seeds: libdl.so.2 (a lone PLT0, .plt.got), librt.so.1 (a lazy
# PLT), and a shared object with IBT's .plt.sec (cc -shared -fPIC -O1
# -fcf-protection -Wl,-z,ibtplt of a file calling puts, malloc, strlen).  With a second
# argument "gnu", DT_HASH is made DT_DEBUG: the GNU hash table counts.
import struct, sys

BASE = 0x7f0000000000
f = open(sys.argv[1], "rb").read()
phoff, = struct.unpack_from("<Q", f, 32)
phnum, = struct.unpack_from("<H", f, 56)
loads, dyn, xpg = [], None, None
for i in range(phnum):
    t, fl, off, va, pa, fsz, msz, al = struct.unpack_from("<IIQQQQQQ", f, phoff + 56 * i)
    if t == 1:
        loads.append((off, va, fsz, msz))
        if fl & 1 and xpg is None:
            xpg = off // 4096
    if t == 2:
        dyn = (va, fsz)
end = max(va + msz for off, va, fsz, msz in loads)
img = bytearray((end + 4095) // 4096 * 4096)
for off, va, fsz, msz in loads:
    img[va:va + fsz] = f[off:off + fsz]
for k in range(dyn[1] // 16):
    tag, val = struct.unpack_from("<qQ", img, dyn[0] + 16 * k)
    if tag == 0:
        break
    # ld.so's: DT_HASH, STRTAB, SYMTAB, GNU_HASH; PLTGOT, RELA, JMPREL, VERSYM
    if tag in (4, 5, 6, 0x6ffffef5, 3, 7, 23, 0x6ffffff0):
        struct.pack_into("<Q", img, dyn[0] + 16 * k + 8, val + BASE)
    if tag == 4 and sys.argv[2:] == ["gnu"]:
        struct.pack_into("<q", img, dyn[0] + 16 * k, 21)
sys.stdout.buffer.write(struct.pack("<QQ", 0, xpg) + bytes(img))
