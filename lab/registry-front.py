#!/usr/bin/env python3
"""A front for a container registry (the tests' `crane registry serve`) that asks what real
registries ask, and breaks what real networks break, so that fastwrite's registry client is
tested against them; the registry behind it stays a real one.

    registry-front.py LISTEN_PORT TARGET_PORT [--bearer] [--user USER:PASSWORD]
                      [--cut-blobs-after N] [--stall-layers-after N] [--endless WHAT]
                      [--throttle N [--retry-after VALUE]] [--stats FILE]

--bearer     every /v2/ request needs `Authorization: Bearer TOKEN`; without it the answer is
             401 with the challenge Docker Hub sends (`WWW-Authenticate: Bearer
             realm="http://127.0.0.1:PORT/token",service="lab-registry",
             scope="repository:NAME:pull"`); GET /token gives a token, anonymously, or with
             --user only to a request whose Basic credentials are USER:PASSWORD (401 else).
--cut-blobs-after N
             the first GET of each blob sends its headers and N bytes of its body, then closes
             the connection; later GETs (a client taking it up again with a Range) pass.
--stall-layers-after N
             every gzip blob's answer (a layer's) sends its headers and N bytes of its body,
             then holds the connection without a word (ENDLESS_SECONDS at most): a layer still
             arriving, for a client to be killed meanwhile.
--endless WHAT
             a hostile registry whose answer never ends (chunked, no Content-Length; each stops
             by itself after ENDLESS_SECONDS or ENDLESS_BYTES, or when the client hangs up):
             `manifests`, every manifest's answer is 200 and endless JSON; `token`, the token's
             answer (with --bearer); `errors`, every manifest's answer is 500 with an endless
             body; `layers`, every gzip blob's answer (a layer's) is its bytes, then zeros
             without end.
--throttle N the first N GETs of a manifest are answered 429 Too Many Requests with Docker Hub's
             error body (TOOMANYREQUESTS), as Docker Hub answers pulls past its rate limit;
             with --retry-after VALUE, each with `Retry-After: VALUE` (seconds, or an HTTP date).
--stats FILE the requests seen, as JSON, rewritten after each one:
             {"requests": N, "unauthorized": N, "tokens": N, "ranged": N, "cut": N, "blobs": N,
              "throttled": N, "endless": N}
             ("blobs": the GETs of a blob, a config or a layer, answered 200 or 206)

LISTEN_PORT 0 takes a free port: the first line on stdout is "listening on PORT" either way.
Only loopback: it listens on 127.0.0.1 and connects to 127.0.0.1.
"""
import argparse
import base64
import http.client
import http.server
import json
import re
import secrets
import sys
import threading
import time

ENDLESS_SECONDS = 60
ENDLESS_BYTES = 4 << 30
LOCK = threading.Lock()
STATS = {"requests": 0, "unauthorized": 0, "tokens": 0, "ranged": 0, "cut": 0, "blobs": 0, "endless": 0, "throttled": 0}
TOKENS = set()
CUT = set()


def count(key, args):
    with LOCK:
        STATS[key] += 1
        if args.stats:
            with open(args.stats, "w") as f:
                json.dump(STATS, f)


def handler(args, port):
    class Front(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def reply(self, status, body=b"", headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def endless(self, status, first=b"", filler=b" "):
            """Answers `status` with `first` and then `filler` without end, chunked, until the
            client hangs up or the bounds are reached."""
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            count("endless", args)
            piece = filler * (64 << 10)
            started, sent = time.monotonic(), 0
            try:
                for chunk in [first] if first else []:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                while time.monotonic() - started < ENDLESS_SECONDS and sent < ENDLESS_BYTES:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent += len(piece)
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def stall(self, body, after):
            """Answers with `body`'s length, sends `after` bytes of it, then holds on."""
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:after])
            self.wfile.flush()
            time.sleep(ENDLESS_SECONDS)
            self.close_connection = True

        def token(self):
            if args.endless == "token":
                return self.endless(200, b'{"token": "', b"a")
            if args.user:
                expected = "Basic " + base64.b64encode(args.user.encode()).decode()
                if self.headers.get("Authorization") != expected:
                    self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}')
                    return
            token = secrets.token_hex(16)
            with LOCK:
                TOKENS.add(token)
            count("tokens", args)
            self.reply(200, json.dumps({"token": token}).encode(), [("Content-Type", "application/json")])

        def authorized(self):
            if not args.bearer:
                return True
            given = self.headers.get("Authorization", "")
            with LOCK:
                ok = given.startswith("Bearer ") and given[7:] in TOKENS
            if ok:
                return True
            count("unauthorized", args)
            name = re.match(r"/v2/(.+?)/(manifests|blobs)/", self.path)
            scope = f',scope="repository:{name.group(1)}:pull"' if name else ""
            challenge = f'Bearer realm="http://127.0.0.1:{port}/token",service="lab-registry"{scope}'
            self.reply(
                401,
                b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}',
                [("WWW-Authenticate", challenge), ("Content-Type", "application/json")],
            )
            return False

        def forward(self):
            count("requests", args)
            if self.path.startswith("/token"):
                return self.token()
            if not self.authorized():
                return
            if self.command == "GET" and re.match(r"/v2/.+/manifests/", self.path):
                with LOCK:
                    throttle = STATS["throttled"] < args.throttle
                if throttle:
                    count("throttled", args)
                    headers = [("Content-Type", "application/json")]
                    if args.retry_after is not None:
                        headers.append(("Retry-After", args.retry_after))
                    body = (b'{"errors":[{"code":"TOOMANYREQUESTS","message":"You have reached '
                            b'your pull rate limit. You may increase the limit by authenticating '
                            b'and upgrading: https://www.docker.com/increase-rate-limit"}]}')
                    return self.reply(429, body, headers)
                if args.endless == "manifests":
                    return self.endless(200, b'{"schemaVersion": 2, "layers": [')
                if args.endless == "errors":
                    return self.endless(500, b'{"errors": [{"code": "UNKNOWN", "message": "')
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "host")}
            if "Range" in self.headers:
                count("ranged", args)
            upstream = http.client.HTTPConnection("127.0.0.1", args.target_port, timeout=60)
            upstream.request(self.command, self.path, headers=headers)
            answer = upstream.getresponse()
            body = answer.read()
            blob = re.match(r"/v2/.+/blobs/(sha256:[0-9a-f]+)$", self.path)
            cut = False
            if blob and self.command == "GET" and answer.status in (200, 206):
                count("blobs", args)
            if blob and self.command == "GET" and args.cut_blobs_after is not None and answer.status == 200:
                with LOCK:
                    cut = blob.group(1) not in CUT and len(body) > args.cut_blobs_after
                    CUT.add(blob.group(1))
            gzip = body.startswith(b"\x1f\x8b")
            if blob and self.command == "GET" and args.stall_layers_after is not None and gzip:
                return self.stall(body, args.stall_layers_after)
            if blob and self.command == "GET" and args.endless == "layers" and answer.status == 200 and gzip:
                return self.endless(200, body, b"\0")
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "HEAD":
                return
            if cut:
                count("cut", args)
                self.wfile.write(body[: args.cut_blobs_after])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

        do_GET = forward
        do_HEAD = forward

    return Front


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("listen_port", type=int)
    parser.add_argument("target_port", type=int)
    parser.add_argument("--bearer", action="store_true")
    parser.add_argument("--user")
    parser.add_argument("--cut-blobs-after", type=int)
    parser.add_argument("--stall-layers-after", type=int)
    parser.add_argument("--endless", choices=["manifests", "token", "errors", "layers"])
    parser.add_argument("--throttle", type=int, default=0)
    parser.add_argument("--retry-after")
    parser.add_argument("--stats")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.listen_port), None)
    port = server.server_address[1]
    server.RequestHandlerClass = handler(args, port)
    server.daemon_threads = True
    print(f"listening on {port}", flush=True)
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
