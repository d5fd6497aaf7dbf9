"""What a bench runs against, started for it and always stopped after it (context managers):
the fastwrite binary (a copy named by its hash, so a rebuild during a bench changes nothing),
the lab's servers (lab/servers.py: the command lines and readiness checks the tests use), the
lab's one delay proxy (lab/delay-proxy.go), the mounts (lab/netfs, lab/slowfs), and each store's
client settings, listings and metadata. Everything listens on 127.0.0.1 and is bounded in time.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "lab"
BUILT = REPO / "target" / "lab"  # what lab/build makes
CACHE = Path(os.environ.get("FASTWRITE_BENCH_CACHE", Path.home() / ".cache" / "fastwrite-bench"))
# Stamped by every delete of ours: the next batch waits until ext4 reuses those inodes again.
SETTLE_MARKER = Path(os.environ.get("TMPDIR", "/tmp")) / "fastwrite-bench.last-cleanup"
sys.path.insert(0, str(LAB))
import servers  # noqa: E402  (lab/servers.py: the tests' way of starting each server)


def say(*words):
    print("bench:", *words, file=sys.stderr, flush=True)


def run(argv, timeout=600, **kw):
    """A command that must succeed (setup, not timed), bounded in time."""
    return subprocess.run([str(a) for a in argv], check=True, timeout=timeout, **kw)


def output(argv, timeout=600, **kw):
    return run(argv, timeout, capture_output=True, text=True, **kw).stdout


def need(program, hint):
    if not shutil.which(program):
        raise SystemExit(f"bench: {program} is required ({hint})")


MISSING = set()  # the peers found missing, so that naming one in --tools is no error


def have(program):
    """Whether a peer is installed; a missing one is left out, saying so."""
    if shutil.which(program):
        return True
    if program not in MISSING:
        say(f"{program} is not installed: left out")
    MISSING.add(program)
    return False


def version(argv):
    try:
        text = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except OSError:
        return "?"
    lines = (text.stdout or text.stderr).strip().splitlines()
    return lines[0] if lines else "?"


def delete(path):
    """Deletes a tree (only between batches or at the end: see runner.wait_for_fast_creates)."""
    if os.path.lexists(path):
        subprocess.run(["rm", "-rf", "--", str(path)], check=True, timeout=3600)
        os.sync()
        SETTLE_MARKER.touch()


def binary(path, name="fastwrite"):
    """A copy of the binary at PATH in the cache, named by its hash: what the bench runs."""
    path = Path(path).resolve()
    if not os.access(path, os.X_OK):
        raise SystemExit(f"bench: no {name} binary at {path} (cargo build --release, or --{name})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    copy = CACHE / "bin" / f"{name}-{digest}"
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, f"{copy}.tmp")
        os.replace(f"{copy}.tmp", copy)
    return str(copy)


def fastwrite(path=None):
    return binary(path or os.environ.get("FASTWRITE") or REPO / "target/release/fastwrite")


@contextlib.contextmanager
def lock():
    """One bench at a time on this machine: two ruin each other's timings (and one's deletes
    slow the other's creates for minutes)."""
    with open(Path(os.environ.get("TMPDIR", "/tmp")) / "fastwrite-bench.lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another bench is running; waiting for it to finish")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def lab_build():
    """Builds the lab (lab/build: the close preload library, the floor model, slowfs, the delay
    proxy); the preload library's path."""
    return output([LAB / "build"], timeout=300).strip()


def cpu_seconds(pid):
    """User + system seconds process PID has used so far (0 when there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def server(name, folder, port=None):
    """A lab server (lab/servers.py) running in FOLDER for the block."""
    with servers.serve(name, str(folder), port) as s:
        yield s


class Proxy:
    def __init__(self, proc, port, stats):
        self.proc, self.pid, self.port, self.stats = proc, proc.pid, port, stats
        self.endpoint = f"http://127.0.0.1:{port}"

    def requests(self):
        """The requests counted so far, by method ({} without -stats)."""
        time.sleep(0.05)  # the proxy counts a request as its head passes: let the last one land
        try:
            return json.loads(Path(self.stats).read_text())["requests"]
        except (OSError, ValueError, TypeError, KeyError):
            return {}


def read_line(proc, seconds, what):
    """The first line PROC prints, within SECONDS."""
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        raise SystemExit(f"bench: {what} did not start: {proc.stderr.read()[-2000:]}")
    return line


@contextlib.contextmanager
def listening(argv, what):
    """A lab process that says "listening on PORT" first (the delay proxy, range-server.py):
    (the process, its port) for the block."""
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    proc = subprocess.Popen([str(a) for a in argv], **pipes)
    try:
        yield proc, int(read_line(proc, 10, what).split()[-1])
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def proxy(target_port, delay_ms, stats=None):
    """The lab's delay proxy in front of TARGET_PORT, DELAY_MS each way; with STATS, it counts
    the HTTP requests there (Proxy.requests)."""
    lab_build()
    exe = BUILT / "delay-proxy"
    if not exe.exists():
        raise SystemExit("bench: lab/build made no delay proxy (it needs Go: .ci/setup)")
    argv = [exe] + (["-stats", stats] if stats else []) + [0, target_port, delay_ms]
    with listening(argv, "the delay proxy") as (proc, port):
        yield Proxy(proc, port, stats)


def s5cmd():
    """s5cmd (v2.3.0): the one on PATH, else built once from the Go module proxy's copy (`go
    install ...@v2.3.0` is refused here: it asks the proxy for the version list), in a writable
    copy of the module with -mod=mod (its zip keeps vendor/modules.txt, not the vendored code)."""
    if shutil.which("s5cmd"):
        return shutil.which("s5cmd")
    exe, go = CACHE / "bin" / "s5cmd", shutil.which("go") or "/usr/local/go/bin/go"
    if not exe.exists():
        say("s5cmd is not installed: building s5cmd v2.3.0 with Go into the cache")
        module = "github.com/peak/s5cmd/v2@v2.3.0"
        with tempfile.TemporaryDirectory() as tmp:
            found = json.loads(
                output([go, "mod", "download", "-json", module], cwd=tmp, env={**os.environ, "GOFLAGS": "-mod=mod"})
            )
            shutil.copytree(found["Dir"], f"{tmp}/src")
            run(["chmod", "-R", "u+w", f"{tmp}/src"])
            flags = "-X=github.com/peak/s5cmd/v2/version.Version=v2.3.0"
            run([go, "build", "-mod=mod", "-o", exe, "-ldflags", flags, "."], cwd=f"{tmp}/src", timeout=1800)
    return str(exe)


class Mount:
    def __init__(self, path):
        self.path, self.backing, self.counts = Path(path), Path(f"{path}.backing"), ""

    def backing_of(self, path):
        """Where a path of the mount lives on the local disk: counted there, no round trips."""
        return self.backing / Path(path).relative_to(self.path)


@contextlib.contextmanager
def mount(kind, path, *args):
    """lab/netfs (sshfs through the delay proxy: `mount("netfs", MNT, DELAY_MS)`) or lab/slowfs
    (`mount("slowfs", MNT, "flush=5", ...)`) at PATH for the block; slowfs's counts after it in
    Mount.counts."""
    script = LAB / kind
    if subprocess.run([script, "check"], timeout=300).returncode != 0:
        raise SystemExit(f"bench: {kind} cannot mount here (root, /dev/fuse, `lab/{kind} install`)")
    run([script, "up", path, *args], timeout=120, stdout=subprocess.DEVNULL)
    m = Mount(path)
    try:
        yield m
    finally:
        down = [script, "down", path]
        m.counts = subprocess.run(down, capture_output=True, text=True, timeout=120).stdout


def clean_env(**extra):
    """This machine's environment without its store settings (a profile, a session token, a CA
    bundle that rclone refuses), with EXTRA."""
    prefixes = ("AWS_", "RCLONE_", "AZURE", "GOOGLE_", "STORAGE_EMULATOR", "S3_ENDPOINT")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env.update(extra)
    return env


class Store:
    """A store the benches write to or read from: its kind (s3, azure, gcs), where the server
    itself answers (DIRECT), the clients' settings for any endpoint (a proxy's), and untimed
    reads of what a run left there (straight from the server)."""

    SCHEMES = {"s3": "s3", "azure": "az", "gcs": "gs"}

    def __init__(self, kind, direct):
        self.kind, self.direct, self.scheme = kind, direct, self.SCHEMES[kind]

    def url(self, bucket, prefix=""):
        return f"{self.scheme}://{bucket}/{prefix}"

    def env(self, endpoint=None):
        """fastwrite's, rclone's (remote B:) and the aws CLI's settings, pointed at ENDPOINT."""
        ep, account = endpoint or self.direct, servers.AZURE_ACCOUNT
        access, secret, region = servers.ACCESS, servers.SECRET, servers.REGION
        words = {  # (space-separated NAME=VALUE; the values hold no spaces)
            "gcs": f"STORAGE_EMULATOR_HOST={ep.removeprefix('http://')} RCLONE_CONFIG_B_TYPE=gcs"
            f" RCLONE_CONFIG_B_ANONYMOUS=true RCLONE_CONFIG_B_ENDPOINT={ep}/storage/v1/",
            "azure": "AZURE_STORAGE_CONNECTION_STRING=DefaultEndpointsProtocol=http;AccountName="
            f"{account};AccountKey={servers.AZURE_KEY};BlobEndpoint={ep}/{account};"
            " RCLONE_CONFIG_B_TYPE=azureblob RCLONE_CONFIG_B_USE_EMULATOR=true"
            f" RCLONE_CONFIG_B_ACCOUNT={account} RCLONE_CONFIG_B_KEY={servers.AZURE_KEY}"
            f" RCLONE_CONFIG_B_ENDPOINT={ep}/{account}",
            "s3": f"AWS_ACCESS_KEY_ID={access} AWS_SECRET_ACCESS_KEY={secret} AWS_REGION={region}"
            f" AWS_DEFAULT_REGION={region} AWS_ENDPOINT_URL={ep} S3_ENDPOINT_URL={ep} AWS_PAGER="
            f" AWS_ALLOW_HTTP=true AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE={os.devnull}"
            f" AWS_SHARED_CREDENTIALS_FILE={os.devnull} RCLONE_CONFIG_B_TYPE=s3"
            f" RCLONE_CONFIG_B_PROVIDER=Other RCLONE_CONFIG_B_REGION={region}"
            f" RCLONE_CONFIG_B_ACCESS_KEY_ID={access} RCLONE_CONFIG_B_SECRET_ACCESS_KEY={secret}"
            f" RCLONE_CONFIG_B_ENDPOINT={ep}",
        }[self.kind]
        return clean_env(RCLONE_CONFIG=os.devnull, **dict(w.split("=", 1) for w in words.split()))

    def make_bucket(self, name):
        if self.kind == "gcs":  # (rclone asks for a project number there)
            req = urllib.request.Request(f"{self.direct}/storage/v1/b", json.dumps({"name": name}).encode())
            return urllib.request.urlopen(req, timeout=60).read()
        public = ["--azureblob-public-access", "container"] if self.kind == "azure" else []
        run(["rclone", "mkdir", *public, f"B:{name}"], timeout=60, env=self.env())

    def list(self, bucket, prefix=""):
        """{key under PREFIX: (size, last modified)} of every object: rclone's listing (every
        page, the server's own times), the same for every store."""
        argv = ["rclone", "lsjson", "-R", "--files-only", "--use-server-modtime", "--no-mimetype"]
        listing = json.loads(output(argv + [f"B:{bucket}/{prefix}"], env=self.env()) or "[]")
        return {o["Path"]: (o["Size"], o["ModTime"]) for o in listing}

    def head(self, bucket, key):
        """An object's user metadata, as the store's own API gives it."""
        if self.kind == "s3":
            argv = ["aws", "s3api", "head-object", "--bucket", bucket, "--key", key]
            return json.loads(output(argv, env=self.env())).get("Metadata", {})
        if self.kind == "gcs":
            url = f"{self.direct}/storage/v1/b/{bucket}/o/{urllib.parse.quote(key, safe='')}"
            return json.load(urllib.request.urlopen(url, timeout=60)).get("metadata", {})
        url = f"{self.direct}/{servers.AZURE_ACCOUNT}/{bucket}/{urllib.parse.quote(key)}"
        answer = urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60)
        return {k[10:].lower(): v for k, v in answer.headers.items() if k.lower()[:10] == "x-ms-meta-"}
