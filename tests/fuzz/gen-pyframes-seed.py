#!/usr/bin/env python3
# Seeds for tests/fuzz/fuzz-pyframes.c: gen-pyframes-seed.py [311|313] >
# tests/fuzz/corpus/pyframes/seed-3NN.  A CPython image with _PyRuntime at
# 0x10000000, one interpreter, one thread state (tid 42) and a chain of two
# frames: 3.11 by unwind/pyframes.c's 3.11 table; 3.13 by a _Py_DebugOffsets
# block at _PyRuntime holding the values of Debian 13's python3.13 3.13.5
# (its sizes and offsets, read out of the binary's .data).
import struct, sys

BASE = 0x10000000
V = sys.argv[1] if len(sys.argv) > 1 else "311"
L311 = dict(rt_interp_head=40, is_threads_head=16, ts_interp=16, ts_native_tid=160,
            ts_frame=56, cf_current=8, fr_previous=48, fr_code=32, fr_instr=56,
            co_filename=112, co_qualname=128, co_linetable=136, co_firstlineno=72,
            co_code=184, str_length=16, str_state=32, str_ascii=48)
L313 = dict(rt_interp_head=632, is_threads_head=7344, ts_interp=16, ts_native_tid=160,
            ts_frame=72, cf_current=None, fr_previous=8, fr_code=0, fr_instr=56,
            co_filename=112, co_qualname=128, co_linetable=136, co_firstlineno=68,
            co_code=200, str_length=16, str_state=32, str_ascii=40)
# the 3.13.5 block: (offset in _Py_DebugOffsets, value), 8 bytes each
BLOCK = [(8, 0x030d03f0), (16, 0), (24, 283376), (32, 608), (40, 632), (48, 194976),
         (56, 7272), (64, 7264), (72, 7344), (152, 304), (160, 0), (168, 8), (176, 16),
         (184, 72), (192, 152), (200, 160), (224, 80), (232, 8), (240, 0), (248, 56),
         (256, 72), (264, 70), (272, 208), (280, 112), (288, 120), (296, 128), (304, 136),
         (312, 68), (344, 200), (352, 16), (360, 8), (512, 40), (520, 16), (528, 32),
         (536, 64), (544, 32), (552, 16), (560, 40)]
L = L313 if V == "313" else L311
img = bytearray(0x6000 if V == "313" else 0x3000)
def p64(at, v): img[at - BASE:at - BASE + 8] = struct.pack('<Q', v)
def p32(at, v): img[at - BASE:at - BASE + 4] = struct.pack('<I', v)
CODE_T, STR_T, BYTES_T = BASE + 0x1000, BASE + 0x1040, BASE + 0x1080
brk = [BASE + 0x1100]
def alloc(n):
    at = brk[0]; brk[0] += (n + 15) & ~15; return at
def mkstr(s):
    o = alloc(L["str_ascii"] + len(s) + 1)
    p64(o + 8, STR_T); p64(o + L["str_length"], len(s))
    p32(o + L["str_state"], 1 << 2 | 1 << 5 | 1 << 6)
    img[o + L["str_ascii"] - BASE:o + L["str_ascii"] - BASE + len(s)] = s
    return o
def mkcode(name, first):
    c = alloc(L["co_code"] + 16); lt = alloc(32 + 8)
    p64(c + 8, CODE_T); p64(c + L["co_qualname"], mkstr(name))
    p64(c + L["co_filename"], mkstr(b'/srv/app.py'))
    p32(c + L["co_firstlineno"], first); p64(c + L["co_linetable"], lt)
    p64(lt + 8, BYTES_T); p64(lt + 16, 5)
    img[lt + 32 - BASE:lt + 37 - BASE] = bytes([0x80 | 10 << 3, 0, 0, 0x80 | 13 << 3 | 3, 2])
    return c
def mkframe(code, prev):
    f = alloc(80); p64(f + L["fr_code"], code); p64(f + L["fr_previous"], prev)
    p64(f + L["fr_instr"], code + L["co_code"] + 2)
    return f
if V == "313":
    img[0:8] = b"xdebugpy"
    for at, v in BLOCK:
        p64(BASE + at, v)
interp = alloc(max(64, L["is_threads_head"] + 8)); ts = alloc(200)
cf = alloc(32) if L["cf_current"] is not None else 0
p64(BASE + L["rt_interp_head"], interp); p64(interp + L["is_threads_head"], ts)
p64(ts + L["ts_interp"], interp); p64(ts + L["ts_native_tid"], 42)
f1 = mkframe(mkcode(b'<module>', 1), 0)
f0 = mkframe(mkcode(b'work', 12), f1)
if L["cf_current"] is None:
    p64(ts + L["ts_frame"], f0)
else:
    p64(ts + L["ts_frame"], cf); p64(cf + L["cf_current"], f0)
sys.stdout.buffer.write(bytes([2 if V == "313" else 0, 0, 0, 0]) + struct.pack('<I', 42)
                        + bytes(img))
