#!/usr/bin/python3
"""perf script -F comm,tid,period,ip,sym,dso (with call chains) on stdin:
one line OPVM-PERF-JSON {...} on stdout with perf's own counts, what the
host's cross-check compares opvm with:
  samples   all samples
  comm      samples per process name (kernel time included, as perf files it)
  sym       samples per "dso symbol" of the sampled frame (top 40), and
            per "dso [plt]" those in the dso's PLT stubs (func@plt: perf
            names them, opvm does not), all of them
  callers   for the top 5 user and top 3 kernel symbols: samples per
            "dso symbol" of the caller
"""
import collections
import json
import os
import re
import sys

FRAME = re.compile(r'^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)$')


def dso_name(dso):
    if dso.startswith('[kernel') or dso.startswith('[vdso'):
        return 'vmlinux' if dso.startswith('[kernel') else 'vdso'
    return os.path.basename(dso)


def sym_name(sym):
    return re.sub(r'\+0x[0-9a-f]+$', '', sym)


def samples(lines):
    head, frames = None, []
    for line in lines:
        line = line.rstrip('\n')
        if not line.strip():
            if head is not None:
                yield head, frames
            head, frames = None, []
        elif line[0].isspace():
            m = FRAME.match(line)
            if m:
                frames.append(dso_name(m.group(3)) + ' ' + sym_name(m.group(2)))
        else:
            if head is not None:
                yield head, frames
            head, frames = line.split()[0], []
    if head is not None:
        yield head, frames


def main():
    comm, sym = collections.Counter(), collections.Counter()
    chains = []
    n = 0
    for c, frames in samples(sys.stdin):
        n += 1
        comm[c] += 1
        if frames:
            sym[frames[0]] += 1
            chains.append(frames[:2])
    callers = {}
    user = [s for s, _ in sym.most_common() if not s.startswith('vmlinux ')][:5]
    kern = [s for s, _ in sym.most_common() if s.startswith('vmlinux ')][:3]
    for s in user + kern:
        cc = collections.Counter(f[1] if len(f) > 1 else '(none)' for f in chains if f[0] == s)
        callers[s] = dict(cc.most_common(8))
    top = dict(sym.most_common(40))
    for s, v in sym.items():
        if s.endswith('@plt'):
            k = s.split(' ', 1)[0] + ' [plt]'
            top[k] = top.get(k, 0) + v
    out = {'samples': n, 'comm': dict(comm), 'sym': top, 'callers': callers}
    print('OPVM-PERF-JSON ' + json.dumps(out, separators=(',', ':')))


main()
