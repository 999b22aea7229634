#!/usr/bin/env python3
"""Drives a disk guest's root shell on its serial console (a unix socket
QEMU or libvirt serves; images/disk/bashrc turns echo off there).

  guest-console.py SOCK wait TIMEOUT        until the shell answers
  guest-console.py SOCK run TIMEOUT CMD...  runs CMD, prints its output,
                                            exits with its status
  guest-console.py SOCK send CMD...         types CMD, returns at once

Every command ends with an echo of a marker the shell computes
(OPVM-END-<n>-<$((n+1))>:<status>), so a marker typed back by a terminal
that still echoes never counts.  The console also carries kernel messages:
output lines are what came between the command and its marker.
"""
import os
import random
import re
import socket
import sys
import time


def connect(path, deadline):
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            s.setblocking(False)
            return s
        except OSError:
            s.close()
            if time.time() > deadline:
                raise SystemExit("guest-console: cannot connect to %s" % path)
            time.sleep(0.5)


def read_until(s, pattern, deadline, buf=b""):
    while True:
        m = re.search(pattern, buf)
        if m:
            return buf, m
        if time.time() > deadline:
            return buf, None
        try:
            d = s.recv(65536)
            if not d:
                return buf, None
            buf += d
        except BlockingIOError:
            time.sleep(0.05)


def command(s, cmd, deadline, retry=0):
    """Types cmd; returns (output, status) or (output, None) at the deadline."""
    n = random.randint(10000, 99999)
    line = "%s; echo OPVM-END-%d-$((%d+1)):$?\n" % (cmd, n, n)
    pat = ("OPVM-END-%d-%d:(\\d+)" % (n, n + 1)).encode()
    buf = b""
    while True:
        s.sendall(line.encode())
        step = min(deadline, time.time() + retry) if retry else deadline
        buf, m = read_until(s, pat, step, buf)
        if m or time.time() >= deadline:
            break
    if not m:
        return buf.decode(errors="replace"), None
    out = buf[:m.start()].decode(errors="replace").replace("\r", "")
    return out, int(m.group(1))


def main():
    sock, what = sys.argv[1], sys.argv[2]
    if what == "send":
        s = connect(sock, time.time() + 10)
        s.sendall((" ".join(sys.argv[3:]) + "\n").encode())
        return 0
    deadline = time.time() + float(sys.argv[3])
    s = connect(sock, deadline)
    if what == "wait":
        # Typed before the getty runs, a line is lost: type again each 3 s.
        _, rc = command(s, "true", deadline, retry=3)
        if rc is None:
            print("guest-console: no shell on %s" % sock, file=sys.stderr)
            return 1
        return 0
    out, rc = command(s, " ".join(sys.argv[4:]), deadline)
    sys.stdout.write(out)
    if rc is None:
        print("guest-console: no answer within %s s" % sys.argv[3], file=sys.stderr)
        return 124
    return rc


sys.exit(main())
