#!/usr/bin/env python3
# A debuginfod that lies, for tests/integration/debuginfod-guest.sh.
# Usage: debuginfod-hostile.py MODE PORT [FILE]
#   other   every /buildid/*/debuginfo and /executable answers FILE (a
#           debug file of another build)
#   huge    answers 64 MiB of an ELF header and zeros, without a length
#   silent  accepts connections and never answers
# Each request is logged to stdout as "GET <path>".
import http.server
import socket
import sys

mode, port = sys.argv[1], int(sys.argv[2])
payload = open(sys.argv[3], "rb").read() if mode == "other" else b""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        print("GET", self.path, flush=True)
        if not self.path.startswith("/buildid/"):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if mode == "other":
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.end_headers()      # huge: no length, the client must count
        self.wfile.write(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
        chunk = b"\0" * (1 << 20)
        try:
            for _ in range(64):
                self.wfile.write(chunk)
        except OSError:
            pass


def silent():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    held = []
    while True:
        c, _ = s.accept()
        held.append(c)
        try:
            c.settimeout(1)
            line = c.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
            print(line, flush=True)
        except OSError:
            pass


if mode == "silent":
    silent()
else:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    srv.serve_forever()
