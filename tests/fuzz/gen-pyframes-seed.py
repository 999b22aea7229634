#!/usr/bin/env python3
# Seed for tests/fuzz/fuzz-pyframes.c: a CPython 3.11 image (the layout of
# unwind/pyframes.c's 3.11 table) with _PyRuntime at 0x10000000, one
# interpreter, one thread state (tid 42) and a chain of two frames.
import struct, sys

BASE = 0x10000000
img = bytearray(0x3000)
def p64(at, v): img[at - BASE:at - BASE + 8] = struct.pack('<Q', v)
def p32(at, v): img[at - BASE:at - BASE + 4] = struct.pack('<I', v)
CODE_T, STR_T, BYTES_T = BASE + 0x1000, BASE + 0x1040, BASE + 0x1080
brk = [BASE + 0x1100]
def alloc(n):
    at = brk[0]; brk[0] += (n + 15) & ~15; return at
def mkstr(s):
    o = alloc(48 + len(s) + 1)
    p64(o + 8, STR_T); p64(o + 16, len(s)); p32(o + 32, 1 << 2 | 1 << 5 | 1 << 6)
    img[o + 48 - BASE:o + 48 - BASE + len(s)] = s
    return o
def mkcode(name, first):
    c = alloc(184 + 16); lt = alloc(32 + 8)
    p64(c + 8, CODE_T); p64(c + 128, mkstr(name)); p64(c + 112, mkstr(b'/srv/app.py'))
    p32(c + 72, first); p64(c + 136, lt)
    p64(lt + 8, BYTES_T); p64(lt + 16, 5)
    img[lt + 32 - BASE:lt + 37 - BASE] = bytes([0x80 | 10 << 3, 0, 0, 0x80 | 13 << 3 | 3, 2])
    return c
def mkframe(code, prev):
    f = alloc(80); p64(f + 32, code); p64(f + 48, prev); p64(f + 56, code + 184 + 2)
    return f
interp = alloc(64); ts = alloc(200); cf = alloc(32)
p64(BASE + 40, interp); p64(interp + 16, ts); p64(ts + 16, interp); p64(ts + 160, 42)
p64(ts + 56, cf)
f1 = mkframe(mkcode(b'<module>', 1), 0)
f0 = mkframe(mkcode(b'work', 12), f1)
p64(cf + 8, f0)
sys.stdout.buffer.write(bytes([0, 0, 0, 0]) + struct.pack('<I', 42) + bytes(img))
