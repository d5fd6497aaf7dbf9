#!/usr/bin/env python3
"""The servers the tests and the benches run, started one way: the same command line, the same
free loopback port found the same way, the same readiness check, the same log file. So a bench
measures the server the tests checked, started as they start it.

    lab/servers.py NAME DIR

starts NAME with its files in DIR (its log in DIR/server.log; versitygw's posix root in
DIR/root), prints one JSON line once it answers, {"name": ..., "port": ..., "endpoint":
"http://127.0.0.1:PORT", "pid": ...}, and runs until it gets SIGTERM or SIGINT (then stops the
server) or the server ends. The server dies with this process even when it is killed
(PR_SET_PDEATHSIG). It exits 1, the log's end on stderr, when the server does not answer in 30 s
on any of 5 ports. The benches import it (`serve`, a context manager).

NAME: versitygw (S3, posix backend, --keep-alive), versitygw-tls (the same over TLS, with the
certificate DIR/cert.pem and key DIR/key.pem; endpoint https://), moto (S3 that ignores If-None-Match,
/opt/moto), azurite (Azure Blob, in memory, /opt/azurite), fake-gcs (Google Cloud Storage, in
memory), registry (`crane registry serve`, in memory). All on 127.0.0.1, plain HTTP.
"""

import contextlib
import ctypes
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

ACCESS, SECRET, REGION = "fastwrite", "fastwrite-secret", "us-east-1"
# Azurite's account and key are public (Microsoft's documentation gives them).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
MOTO = "/opt/moto/bin/moto_server"
AZURITE = "/opt/azurite/bin/azurite-blob"
START_TIMEOUT = 30


def _versitygw(port, folder, tls=False):
    root = os.path.join(folder, "root")
    os.makedirs(root, exist_ok=True)
    # Behind TLS: the certificate and key the caller put in FOLDER (a private CA's, say).
    certificate = ["--cert", os.path.join(folder, "cert.pem"), "--key", os.path.join(folder, "key.pem")]
    return (
        ["versitygw", "--port", f"127.0.0.1:{port}", "--access", ACCESS, "--secret", SECRET]
        + (certificate if tls else [])
        + f"--region {REGION} --keep-alive --quiet --health /health posix".split()
        + [root]
    )


# NAME: (command for a port and a folder, the path that answers when it is up, a mark its answer
# holds: the server's own, not another that took the port).
SERVERS = {
    "versitygw": (_versitygw, "/health", "VERSITYGW"),
    "versitygw-tls": (lambda port, folder: _versitygw(port, folder, tls=True), "/health", "VERSITYGW"),
    "moto": (lambda port, _: [MOTO, "-H", "127.0.0.1", "-p", str(port)], "/moto-api/", "moto"),
    "azurite": (
        lambda port, _: (
            [AZURITE]
            + "--disableTelemetry --inMemoryPersistence --silent --blobHost 127.0.0.1".split()
            + ["--blobPort", str(port)]
        ),
        "/",
        "Azurite-Blob",
    ),
    "fake-gcs": (
        # A public host without a port: `/BUCKET/OBJECT` is then served to requests for that host
        # on any port (a proxy's in front, too).
        lambda port, _: (
            ["fake-gcs-server", "-port", str(port)]
            + "-scheme http -host 127.0.0.1 -backend memory -log-level error".split()
            + ["-public-host", "127.0.0.1"]
        ),
        "/storage/v1/b",
        "storage#buckets",
    ),
    "registry": (lambda port, _: ["crane", "registry", "serve", "--address", f"127.0.0.1:{port}"], "/v2/", ""),
}


def free_port():
    """A loopback port free now (another process may take it first: `start` then tries again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port, path, mark, tls=False):
    try:
        if tls:  # whoever's certificate it is: only whether it answers
            context = ssl._create_unverified_context()
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", path)
        answer = conn.getresponse()
        text = f"{answer.getheaders()}{answer.read(1 << 16)!r}"
        conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return mark in text and (answer.status == 200 or mark.startswith("Azurite"))


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def start(name, folder, port=None):
    """Starts NAME in FOLDER (on PORT, else a free one): (the Popen, its port). Raises
    RuntimeError with the log's end."""
    command, path, mark = SERVERS[name]
    os.makedirs(folder, exist_ok=True)
    log_path = os.path.join(folder, "server.log")
    # Their own settings only: none of this machine's (VGW_*, ROOT_* would change versitygw's).
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VGW_", "ROOT_"))}
    fixed = port
    for attempt in range(5):
        if fixed and attempt:
            time.sleep(0.5)  # the same port, once its last owner let it go
        port = fixed or free_port()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                command(port, folder),
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while proc.poll() is None and time.monotonic() < deadline:
            if _answers(port, path, mark, tls=name.endswith("-tls")):
                return proc, port
            time.sleep(0.02)
        stop(proc)
    with open(log_path, errors="replace") as f:
        tail = f.read()[-2000:]
    raise RuntimeError(f"{name} did not answer on 127.0.0.1 in 5 tries\n--- its log ---\n{tail}")


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Running:
    """A started server: its port, endpoint and pid (whose CPU time a bench reads)."""

    def __init__(self, name, proc, port):
        self.name, self.proc, self.port, self.pid = name, proc, port, proc.pid
        self.endpoint = f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def serve(name, folder, port=None):
    """NAME running in FOLDER for the `with` block, stopped after it whatever happens."""
    proc, port = start(name, folder, port)
    try:
        yield Running(name, proc, port)
    finally:
        stop(proc)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SERVERS:
        sys.exit(f"usage: servers.py {{{','.join(SERVERS)}}} DIR")
    name, folder = sys.argv[1], sys.argv[2]
    try:
        proc, port = start(name, folder)
    except (RuntimeError, OSError) as e:
        sys.exit(f"servers.py: {e}")
    asked = []

    def ask_to_stop(*_):
        # Only signals here: the main thread is inside proc.wait(), which holds Popen's lock.
        asked.append(True)
        proc.terminate()
        signal.alarm(10)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, ask_to_stop)
    signal.signal(signal.SIGALRM, lambda *_: proc.kill())
    scheme = "https" if name.endswith("-tls") else "http"
    line = {"name": name, "port": port, "endpoint": f"{scheme}://127.0.0.1:{port}", "pid": proc.pid}
    print(json.dumps(line), flush=True)
    code = proc.wait()
    sys.exit(0 if asked else code)


if __name__ == "__main__":
    main()
