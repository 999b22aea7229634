#!/usr/bin/env python3
# A process that looks like a QEMU to opvm top and the exporter: its command
# name is qemu-system-x86_64 (written to /proc/self/comm; start it with
# `exec -a qemu-system-x86_64 python3 fake-qemu.py ...` so that its command
# line starts with that name too) and its command line carries
# `-qmp unix:PATH,server=on,wait=off` and `-name NAME`, which is how
# host/hoststats/procstat.c finds QEMUs in /proc.
#
#   fake-qemu.py MODE QMP_PATH [-name NAME] [-qmp ...]   (extra args ignored)
#
# MODE:
#   full    the QMP socket listens and never accepts, and its backlog is
#           full: a connect() to it blocks (what any local user can do)
#   silent  the socket listens and never accepts, backlog not full: a
#           connect() succeeds and no greeting ever comes
#   none    no socket at all (QMP_PATH is not made): a connect fails at once
#   answer  a well-behaved QMP server: greeting, qmp_capabilities,
#           query-cpus-fast (this thread as vCPU 0), {} for anything else
#   deputy  as answer, but a liar that would make a root opvm its deputy:
#           query-kvm says KVM, query-cpus-fast names FAKE_QEMU_VCPU_TID
#           (another process) as vCPU 0, `info mtree -f` gives one 64 KiB
#           RAM range and gpa2hva puts it at FAKE_QEMU_HVA (an address in
#           that other process)
#   slow    as answer, but each message (the greeting too) is sent
#           FAKE_QEMU_DELAY seconds (default 0.9) after its cause: every
#           reply comes just within a per-call deadline of 1 s.  Prints
#           "got CMD" for each command and "gone" when a reply finds the
#           client gone
# FAKE_QEMU_FORKS=N: N more such processes (forked children that only
# wait, with the same command line and no socket of their own), ended with
# it: a burst of QEMUs in /proc at the cost of one.
# Runs until killed.  Writes "ready" to stdout once the socket listens.
# FAKE_QEMU_THREADS=N in the environment: N more threads, idle (a process
# any local user can give as many threads as its limits allow).
import json
import os
import signal
import socket
import sys
import threading
import time

mode, path = sys.argv[1], sys.argv[2]
with open("/proc/self/comm", "w") as f:
    f.write("qemu-system-x86_64")
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))

if mode != "none":
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
keep = []


def serve(c):
    try:
        answer(c)
    except OSError:
        pass    # the client went away


DELAY = float(os.environ.get("FAKE_QEMU_DELAY", "0.9")) if mode == "slow" else 0


def send(c, obj):
    if DELAY:
        time.sleep(DELAY)
    try:
        c.sendall((json.dumps(obj) + "\r\n").encode())
    except OSError:
        if DELAY:
            print("gone", flush=True)
        raise


def answer(c):
    # QMP input is a stream of JSON objects, not lines (opvm sends none).
    send(c, {"QMP": {"version": {"qemu": {"major": 7, "minor": 2, "micro": 0}},
                     "capabilities": []}})
    return serve_commands(c)


def hmp(line):
    if line == "info mtree -f":
        return ("FlatView #0\n AS \"memory\", root: system\n"
                " Root memory region: system\n"
                "  0000000000000000-000000000000ffff (prio 0, ram): pc.ram\n")
    if line.startswith("gpa2hva"):
        return "Host virtual address for 0x0 (pc.ram) is %s\n" % os.environ["FAKE_QEMU_HVA"]
    return ""


def serve_commands(c):
    dec, buf = json.JSONDecoder(), ""
    while True:
        data = c.recv(4096)
        if not data:
            return
        buf += data.decode("utf-8", "replace")
        while True:
            buf = buf.lstrip()
            try:
                msg, end = dec.raw_decode(buf)
            except ValueError:
                break
            buf = buf[end:]
            cmd = msg.get("execute") if isinstance(msg, dict) else None
            if DELAY:
                print("got %s" % cmd, flush=True)
            if cmd == "query-cpus-fast":
                tid = os.getpid()
                if mode == "deputy":
                    tid = int(os.environ["FAKE_QEMU_VCPU_TID"])
                ret = [{"cpu-index": 0, "thread-id": tid, "target": "x86_64"}]
            elif cmd == "query-kvm" and mode == "deputy":
                ret = {"enabled": True, "present": True}
            elif cmd == "human-monitor-command" and mode == "deputy":
                ret = hmp(msg.get("arguments", {}).get("command-line", ""))
            elif cmd == "query-status":
                ret = {"running": True, "status": "running"}
            else:
                ret = {}
            send(c, {"return": ret})


if mode == "full":
    # A unix socket's accept queue takes backlog + 1 connections; with
    # backlog 0 one queued connection (our own) fills it.
    srv.listen(0)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    keep.append(c)
elif mode == "silent":
    srv.listen(64)
elif mode in ("answer", "slow", "deputy"):
    srv.listen(16)
threading.stack_size(64 * 1024)
for _ in range(int(os.environ.get("FAKE_QEMU_THREADS", "0"))):
    threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
children = []


def fork_idle():
    pid = os.fork()
    if pid:
        return pid
    # the child ends with its parent, however that ends
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(0)
    while True:
        signal.pause()


for _ in range(int(os.environ.get("FAKE_QEMU_FORKS", "0"))):
    children.append(fork_idle())


def end_all(*_):
    # reaped here, so that none is left a zombie in /proc for a while
    for p in children:
        os.kill(p, signal.SIGKILL)
    for p in children:
        os.waitpid(p, 0)
    os._exit(0)


signal.signal(signal.SIGTERM, end_all)
print("ready", flush=True)
if mode not in ("answer", "slow", "deputy"):
    while True:
        time.sleep(3600)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
