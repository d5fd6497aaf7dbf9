#!/usr/bin/env python3
"""An S3 endpoint that misbehaves on purpose: forwards TCP from LISTEN_PORT to
127.0.0.1:TARGET_PORT (an S3 server, such as the tests' versitygw) and reads the HTTP requests
that pass so that it can fail some of them, in one of four ways (--fault). It adds no latency:
that is lab/delay-proxy.go's job (the lab's one delay proxy), which can stand in front of it.

  slowdown  answer 503 SlowDown with S3's XML error body, as S3 does when it throttles
            (the request never reaches the server; the connection is closed after it);
            with --retry-after VALUE, a `Retry-After: VALUE` header too
  reset     pass the request's head and half its body on, then reset both connections
  stall     swallow the request and answer nothing for --stall-s seconds, then close
  lose      pass the whole request on, let the server do it, then reset the client's
            connection without its answer (a PUT that landed, whose client never heard so)

Usage: s3-proxy.py LISTEN_PORT TARGET_PORT [--fault KIND] [--method M]
                   [--after M] [--first N | --fraction F [--seed S]] [--stall-s T]
                   [--retry-after VALUE]
                   [--stats FILE]

LISTEN_PORT 0 takes a free port: the first line on stdout is "listening on PORT" either way.
The requests that may fail are those with method M (PUT by default: PutObject and UploadPart;
POST is CompleteMultipartUpload); --first N fails the first N of them, --fraction F each with
probability F (seeded: the same run fails the same requests); --after M lets the first M of
them through first. Every request is counted by
method, and every fault by kind; the counts are written as JSON to FILE after each request
and at exit (SIGTERM, SIGINT), or without --stats to stdout at exit, with the most requests
that arrived within any one second:
  {"requests": {"HEAD": 1, "PUT": 5}, "faults": {"slowdown": 2}, "busiest_second": 6}

Only loopback: it listens on 127.0.0.1 and connects to 127.0.0.1. It speaks HTTP/1.1 as S3
clients do, without pipelining (a request, its response, then the next on the connection);
bodies by Content-Length or chunked.
"""
import argparse
import asyncio
import collections
import json
import os
import random
import signal
import socket
import struct
import time

SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message>"
    b"<RequestId>S3PROXY</RequestId><HostId>s3-proxy</HostId></Error>")


class Stats:
    def __init__(self, path):
        self.path = path
        self.requests = collections.Counter()
        self.faults = collections.Counter()
        # The arrivals of the last second, and the most there ever were in one second.
        self.recent = collections.deque()
        self.busiest_second = 0

    def arrived(self, method):
        self.requests[method] += 1
        now = time.monotonic()
        self.recent.append(now)
        while self.recent[0] <= now - 1.0:
            self.recent.popleft()
        self.busiest_second = max(self.busiest_second, len(self.recent))

    def write(self):
        text = json.dumps({"requests": dict(sorted(self.requests.items())),
                           "faults": dict(sorted(self.faults.items())),
                           "busiest_second": self.busiest_second})
        if self.path is None:
            print(text, flush=True)
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, self.path)  # a reader never sees half a file


class Faults:
    """Which requests fail: the first N with the method, or a seeded fraction of them."""

    def __init__(self, args):
        self.args = args
        self.seen = 0
        self.rng = random.Random(args.seed)

    def pick(self, method):
        a = self.args
        if a.fault is None or method != a.method:
            return None
        self.seen += 1
        if self.seen <= a.after:
            return None
        if a.first is not None:
            return a.fault if self.seen - a.after <= a.first else None
        return a.fault if self.rng.random() < a.fraction else None


class Upstream:
    """Sends what it is given to `writer`, in order, without the caller waiting (b"" closes)."""

    def __init__(self, writer):
        self.writer = writer
        self.queue = asyncio.Queue()
        self.task = asyncio.create_task(self._run())

    def send(self, data):
        self.queue.put_nowait(data)

    async def _run(self):
        while True:
            data = await self.queue.get()
            if not data:
                self.writer.close()
                return
            self.writer.write(data)
            await self.writer.drain()


async def downstream_pipe(reader, writer):
    """The server's answers to the client, as they come."""
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    writer.close()


async def read_head(reader):
    """A request's head (request line and headers, with the blank line), or None at EOF."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise ConnectionError("the client closed mid-head") from e
        return None


def parse_head(head):
    lines = head.decode("latin-1").split("\r\n")
    method = lines[0].split(" ", 1)[0]
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, headers


async def body(reader, headers):
    """The request's body as it came (chunk framing included), piece by piece."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            yield size_line
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                while True:  # trailers, up to the blank line
                    line = await reader.readuntil(b"\r\n")
                    yield line
                    if line == b"\r\n":
                        return
            yield await reader.readexactly(size + 2)
    left = int(headers.get("content-length", "0"))
    while left > 0:
        piece = await reader.read(min(left, 1 << 16))
        if not piece:
            raise ConnectionError("the client closed mid-body")
        left -= len(piece)
        yield piece


def reset(writer):
    """Closes with a TCP reset (RST), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def close_gently(reader, writer):
    """Half-closes, then reads what the client still sends (a body it began) until it closes,
    so that the answer already written is read, not lost to a reset."""
    try:
        writer.write_eof()
        async with asyncio.timeout(5):
            while await reader.read(1 << 16):
                pass
    except (ConnectionError, OSError, TimeoutError):
        pass
    writer.close()


async def fail(kind, args, headers, client_reader, client_writer, upstream, head):
    """Fails the request whose head was just read."""
    if kind == "slowdown":
        # With `Expect: 100-continue` the client sends no body before an answer.
        if "100-continue" not in headers.get("expect", "").lower():
            async for _ in body(client_reader, headers):
                pass
        client_writer.write(
            b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n"
            + f"Content-Length: {len(SLOWDOWN_BODY)}\r\n".encode()
            + (f"Retry-After: {args.retry_after}\r\n".encode() if args.retry_after else b"")
            + b"Connection: close\r\nx-amz-request-id: S3PROXY\r\n\r\n" + SLOWDOWN_BODY)
        await client_writer.drain()
        await close_gently(client_reader, client_writer)
    elif kind == "reset":
        upstream.send(head)
        half = int(headers.get("content-length", "0")) // 2
        if half and "100-continue" not in headers.get("expect", "").lower():
            upstream.send(await client_reader.readexactly(half))
        await asyncio.sleep(0.05)  # what was passed on has arrived
        reset(client_writer)
    elif kind == "lose":
        upstream.send(head)
        async for piece in body(client_reader, headers):
            upstream.send(piece)
        await asyncio.sleep(0.5)  # the server has done it, and answered
        reset(client_writer)
    elif kind == "stall":
        await asyncio.sleep(args.stall_s)
        client_writer.close()


async def handle(client_reader, client_writer, args, stats, faults):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", args.target)
    except OSError:
        client_writer.close()
        return
    upstream = Upstream(server_writer)
    downstream = asyncio.create_task(downstream_pipe(server_reader, client_writer))
    try:
        while True:
            head = await read_head(client_reader)
            if head is None:  # the client is done: so is the server, after it
                upstream.send(b"")
                await asyncio.gather(upstream.task, downstream)
                return
            method, headers = parse_head(head)
            stats.arrived(method)
            kind = faults.pick(method)
            if kind is not None:
                stats.faults[kind] += 1
            if stats.path is not None:
                stats.write()
            if kind is None:
                upstream.send(head)
                async for piece in body(client_reader, headers):
                    upstream.send(piece)
                continue
            downstream.cancel()
            upstream.task.cancel()
            if kind == "reset":  # let the server see the torn request, then reset it too
                upstream = Upstream(server_writer)
            await fail(kind, args, headers, client_reader, client_writer, upstream, head)
            if kind == "reset":
                reset(server_writer)
            else:
                server_writer.close()
            return
    except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        client_writer.close()
        server_writer.close()
    finally:
        downstream.cancel()
        upstream.task.cancel()


async def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("listen", type=int)
    p.add_argument("target", type=int)
    p.add_argument("--fault", choices=["slowdown", "reset", "stall", "lose"])
    p.add_argument("--after", type=int, default=0)
    p.add_argument("--method", default="PUT")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--first", type=int)
    g.add_argument("--fraction", type=float, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stall-s", type=float, default=120)
    p.add_argument("--retry-after")
    p.add_argument("--stats")
    args = p.parse_args()
    stats, faults = Stats(args.stats), Faults(args)

    async def serve(reader, writer):
        try:
            await handle(reader, writer, args, stats, faults)
        except asyncio.CancelledError:  # at exit: a stalled request, say
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", args.listen)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
        stats.write()


if __name__ == "__main__":
    asyncio.run(main())
