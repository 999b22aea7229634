#!/usr/bin/env python3
# A unix socket that a libvirt client takes for libvirtd's and that never
# answers: what a hung libvirtd (or any local user's socket named by a
# qemu+unix:///system?socket=PATH URI) looks like to opvm top and the
# exporter.
#
#   fake-libvirtd.py MODE PATH
#
# MODE:
#   silent  accepts every connection and reads what comes, never writing a
#           byte (libvirt's client waits for its first RPC reply for ever)
#   full    listens and never accepts, its backlog full: a connect() blocks
# Runs until killed.  Writes "ready" to stdout once the socket listens, and
# "accepted N" for each connection it takes.
import os
import signal
import socket
import sys
import threading
import time

mode, path = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
try:
    os.unlink(path)
except FileNotFoundError:
    pass
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
keep = []


def swallow(c):
    try:
        while c.recv(4096):
            pass
    except OSError:
        pass


if mode == "full":
    # A unix socket's accept queue takes backlog + 1 connections; with
    # backlog 0 one queued connection (our own) fills it.
    srv.listen(0)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    keep.append(c)
    print("ready", flush=True)
    while True:
        time.sleep(3600)
srv.listen(16)
print("ready", flush=True)
n = 0
while True:
    c, _ = srv.accept()
    n += 1
    keep.append(c)
    print("accepted %d" % n, flush=True)
    threading.Thread(target=swallow, args=(c,), daemon=True).start()
