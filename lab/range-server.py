#!/usr/bin/env python3
"""An HTTP server for a folder's files that answers byte ranges, as web servers and CDNs do
(Python's own http.server does not), and misbehaves on purpose when asked.

Usage: range-server.py ROOT [--port P] [--no-ranges] [--cut-after N] [--cuts K]
                       [--change-after M] [--redirect FROM=TO ...] [--rate BYTES_PER_S]
                       [--shared-rate BYTES_PER_S] [--hold A-B --hold-until FILE]
                       [--stats FILE] [--tls CERT KEY]

  GET and HEAD of ROOT's files, over HTTP/1.1 with keep-alive. One range per request
  ("bytes=A-B", "bytes=A-", "bytes=-N"): 206 with Content-Range, or 416 past the end. Every
  answer has an ETag (from the file's size and mtime) and Last-Modified; If-Match with another
  ETag is answered 412, as a server answers when the file was replaced.

  --no-ranges       ignore Range: every GET is a whole 200 (an old or simple server)
  --cut-after N     the first K (--cuts, default 1) GETs longer than N bytes send N bytes of
                    their body and then close the connection (a connection dropped mid-file)
  --change-after M  after M requests, every file's ETag and Last-Modified are new (as if each
                    file had been replaced): a client's If-Match then gets 412
  --redirect F=T    a GET of /F is answered 301 Location: /T
  --rate B          each response's body goes at most B bytes a second (one connection of a
                    slow link; several responses at once get B each)
  --shared-rate B   all responses' bodies together go at most B bytes a second (a link that is
                    itself the limit: a home or office line, a cross-region link, shared by
                    every connection); with --rate, each connection is held to both
  --hold A-B        no byte of any file from offset A up to B is sent until the file named by
  --hold-until F    --hold-until exists (a part of the way that is slow to come, for a client
                    that should be busy with what came before and after it meanwhile)
  --tls CERT KEY    HTTPS, with this certificate (PEM, its chain after it) and key
  A request whose target is a whole URL ("GET http://host/path", as a client sends it to an
  HTTP proxy) is served by its path and counted as "proxied".

PORT 0 (the default) takes a free port: the first line on stdout is "listening on PORT".
Counts of requests by kind are written as JSON to FILE after each request:
  {"requests": 3, "ranged": 2, "whole": 1, "cut": 0, "precondition": 0, "proxied": 0}
Only loopback: it listens on 127.0.0.1.
"""
import argparse
import email.utils
import http.server
import json
import os
import re
import ssl
import sys
import threading
import time
import urllib.parse

RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--no-ranges", action="store_true")
    ap.add_argument("--cut-after", type=int)
    ap.add_argument("--cuts", type=int, default=1)
    ap.add_argument("--change-after", type=int)
    ap.add_argument("--redirect", action="append", default=[])
    ap.add_argument("--rate", type=float)
    ap.add_argument("--shared-rate", type=float)
    ap.add_argument("--hold")
    ap.add_argument("--hold-until")
    ap.add_argument("--stats")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = ap.parse_args()
    held = tuple(int(n) for n in args.hold.split("-")) if args.hold else None

    def bytes_until_held(at, want):
        """How many of `want` bytes from `at` may go now: up to where a held part begins;
        waits for --hold-until where `at` is inside it."""
        if not held or at >= held[1] or at + want <= held[0]:
            return want
        if at < held[0]:
            return held[0] - at
        while not os.path.exists(args.hold_until):
            time.sleep(0.02)
        return want
    root = os.path.realpath(args.root)
    redirects = dict(r.split("=", 1) for r in args.redirect)
    lock = threading.Lock()
    # --shared-rate: when the link is next free; each chunk takes its turn on it.
    link_lock = threading.Lock()
    link_free = [time.monotonic()]

    def take_link(n):
        """Waits for the shared link to carry `n` bytes (its turn after every chunk before)."""
        with link_lock:
            start = max(time.monotonic(), link_free[0])
            link_free[0] = start + n / args.shared_rate
            done = link_free[0]
        wait = done - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    cuts_taken = [0]
    counts = {"requests": 0, "ranged": 0, "whole": 0, "cut": 0, "precondition": 0,
              "proxied": 0}

    def count(kind):
        """Counts one `kind`; returns its count now (taken under the lock: each request has its
        own number, however many come at once)."""
        with lock:
            counts[kind] += 1
            if args.stats:
                tmp = args.stats + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(counts, f)
                os.replace(tmp, args.stats)
            return counts[kind]

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_HEAD(self):
            self.answer(body=False)

        def do_GET(self):
            self.answer(body=True)

        def fail(self, code):
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def answer(self, body):
            number = count("requests")
            changed = args.change_after is not None and number > args.change_after
            target = self.path
            if "://" in target:
                count("proxied")
                target = "/" + target.split("://", 1)[1].partition("/")[2]
            path = urllib.parse.unquote(target.split("?", 1)[0])
            if path.lstrip("/") in redirects:
                self.send_response(301)
                self.send_header("Location", "/" + redirects[path.lstrip("/")])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            full = os.path.realpath(os.path.join(root, path.lstrip("/")))
            if not full.startswith(root + os.sep) or not os.path.isfile(full):
                return self.fail(404)
            st = os.stat(full)
            size = st.st_size
            stamp = st.st_mtime_ns + (10**9 if changed else 0)
            etag = '"%x-%x"' % (size, stamp)
            modified = email.utils.formatdate(stamp / 1e9, usegmt=True)
            wanted = self.headers.get("If-Match")
            if wanted is not None and wanted.strip() not in ("*", etag):
                count("precondition")
                return self.fail(412)
            start, end, status = 0, size, 200
            asked = self.headers.get("Range")
            if asked and not args.no_ranges:
                m = RANGE.match(asked.strip())
                if m and (m.group(1) or m.group(2)):
                    a, b = m.group(1), m.group(2)
                    if a == "":
                        start, end = max(0, size - int(b)), size
                    else:
                        start = int(a)
                        end = min(size, int(b) + 1) if b else size
                    if start >= size or start >= end:
                        self.send_response(416)
                        self.send_header("Content-Range", "bytes */%d" % size)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    status = 206
            count("ranged" if status == 206 else "whole")
            self.send_response(status)
            self.send_header("Content-Length", str(end - start))
            self.send_header("ETag", etag)
            self.send_header("Last-Modified", modified)
            self.send_header("Accept-Ranges", "none" if args.no_ranges else "bytes")
            if status == 206:
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
            self.end_headers()
            if not body:
                return
            limit = end - start
            cut = False
            with lock:
                if (args.cut_after is not None and cuts_taken[0] < args.cuts
                        and limit > args.cut_after):
                    limit, cut = args.cut_after, True
                    cuts_taken[0] += 1
            with open(full, "rb") as f:
                f.seek(start)
                left = limit
                began, sent = time.monotonic(), 0
                while left > 0:
                    data = f.read(bytes_until_held(f.tell(), min(left, 1 << 16)))
                    if not data:
                        break
                    if args.shared_rate:
                        take_link(len(data))
                    self.wfile.write(data)
                    left -= len(data)
                    sent += len(data)
                    if args.rate:
                        ahead = sent / args.rate - (time.monotonic() - began)
                        if ahead > 0:
                            time.sleep(ahead)
            if cut:
                count("cut")
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)

    class Server(http.server.ThreadingHTTPServer):
        # socketserver's backlog of 5 drops the SYNs of a burst of connections, which then
        # wait a second for their retransmission; web servers listen with hundreds.
        request_queue_size = 511

    server = Server(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*args.tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("listening on %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
