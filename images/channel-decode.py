#!/usr/bin/env python3
# Decode an opvm channel capture (guest-kmod/opvm_proto.h records), one
# record per line, for tests and debugging:
#   channel-decode.py [--json] FILE
# Output: "<seq> <TYPE> key=value ..." or, with --json, one JSON object per
# record with the same keys as `opvm channel-dump --json`; a malformed stream
# stops with "ERROR <offset> <reason>" and exit status 1.  `opvm channel-dump` is the
# host's own decoder; this one is independent on purpose (a test oracle).
import json
import struct
import sys

MAGIC = 0x564f
NAMES = {1: 'HELLO', 2: 'LOST', 3: 'PROC', 4: 'EXEC', 5: 'PROC_EXIT',
         6: 'THREAD', 7: 'THREAD_EXIT', 8: 'COOKIE', 9: 'MMAP',
         10: 'MUNMAP', 11: 'MODULE', 12: 'MODULE_FREE', 13: 'SYNC'}


def cstr(b):
    return b.split(b'\0', 1)[0].decode('utf-8', 'replace').replace(' ', '_')


def decode(data):
    off = 0
    while off + 16 <= len(data):
        magic, typ, ln, seq, _ = struct.unpack_from('<HHIII', data, off)
        if magic != MAGIC or ln < 16 or ln % 8 or ln > 8192:
            yield 'ERROR %d bad header magic=%#x len=%d' % (off, magic, ln)
            return
        if off + ln > len(data):
            yield 'ERROR %d truncated record' % off
            return
        p = data[off + 16:off + ln]
        name = NAMES.get(typ, 'TYPE%d' % typ)
        f = ''
        if typ == 1:
            (ver, ncpu, slot_pa, slot_size, _pob, anchor, text) = \
                struct.unpack_from('<IIQIIQQ', p)
            f = ('version=%d nr_cpus=%d slot_pa=%#x slot_size=%d '
                 'anchor_addr=%#x text_addr=%#x anchor=%s release=%s' %
                 (ver, ncpu, slot_pa, slot_size, anchor, text,
                  cstr(p[40:104]), cstr(p[104:169])))
        elif typ == 2:
            f = 'count=%d' % struct.unpack_from('<Q', p)
        elif typ in (3, 4):
            tgid, ppid, cr3, exe = struct.unpack_from('<IIQQ', p)
            f = 'tgid=%d ppid=%d cr3=%#x exe_cookie=%d comm=%s' % (
                tgid, ppid, cr3, exe, cstr(p[24:40]))
        elif typ in (5, 7):
            f = 'tid=%d tgid=%d' % struct.unpack_from('<II', p)
        elif typ == 6:
            tid, tgid = struct.unpack_from('<II', p)
            f = 'tid=%d tgid=%d comm=%s' % (tid, tgid, cstr(p[8:24]))
        elif typ == 8:
            cookie, = struct.unpack_from('<Q', p)
            bid = p[8:40]
            bl, _, plen = struct.unpack_from('<BBH', p, 40)
            path = p[48:48 + plen].decode('utf-8', 'replace')
            f = 'cookie=%d build_id=%s path=%s' % (
                cookie, bid[:bl].hex() or '-', path.replace(' ', '\\x20'))
        elif typ == 9:
            tgid, prot, start, end, pgoff, cookie = \
                struct.unpack_from('<IIQQQQ', p)
            f = 'tgid=%d prot=%d start=%#x end=%#x pgoff=%#x cookie=%d' % (
                tgid, prot, start, end, pgoff, cookie)
        elif typ == 10:
            tgid, _, start, end = struct.unpack_from('<IIQQ', p)
            f = 'tgid=%d start=%#x end=%#x' % (tgid, start, end)
        elif typ in (11, 12):
            base, size = struct.unpack_from('<QQ', p)
            f = 'base=%#x size=%#x name=%s' % (base, size, cstr(p[16:72]))
        elif typ == 13:
            f = 'nr_procs=%d nr_modules=%d' % struct.unpack_from('<QQ', p)
        yield '%d %s %s' % (seq, name, f)
        off += ln
    if off != len(data):
        yield 'ERROR %d %d trailing bytes' % (off, len(data) - off)


def to_json(line):
    """Text line -> dict keyed like `opvm channel-dump --json`."""
    seq, typ, rest = (line.split(' ', 2) + [''])[:3]
    kv = dict(f.split('=', 1) for f in rest.split(' ') if '=' in f)
    ren = {'nr_cpus': 'cpus', 'text_addr': 'text', 'exe_cookie': 'exe',
           'nr_procs': 'procs', 'nr_modules': 'modules'}
    o = {'seq': int(seq), 'type': typ}
    for k, v in kv.items():
        k = ren.get(k, k)
        if typ == 'COOKIE' and k == 'cookie':
            k = 'id'
        if k in ('tgid', 'tid', 'ppid', 'version', 'cpus', 'slot_size',
                 'procs', 'modules', 'count'):
            v = int(v, 0)
        elif k == 'path':
            v = v.replace('\\x20', ' ')
        o[k] = v
    return o


def main():
    args = sys.argv[1:]
    as_json = args and args[0] == '--json'
    if as_json:
        args = args[1:]
    with open(args[0], 'rb') as fh:
        data = fh.read()
    status = 0
    for line in decode(data):
        if line.startswith('ERROR'):
            status = 1
            print(line)
        elif as_json:
            print(json.dumps(to_json(line)))
        else:
            print(line)
    return status


if __name__ == '__main__':
    sys.exit(main())
