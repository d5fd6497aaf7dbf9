"""Into and out of object storage: fastwrite against the tools users have, on the tests' servers.

    benches/bench.py s3 [--mode copy|sync|download|memory] [--store s3|azure|gcs] [--count N]
                        [--base BINARY] [DELAY_MS|direct ...]         (default: 0 5 20)

versitygw, Azurite (afresh before each run: it slows as it fills) or fake-gcs-server, started
by lab/servers.py, behind the delay proxy (requests counted; `direct`: none, no counts); the
botocore wheel and its tree; every run's prefix or folder, listed from the server, exactly the
tree's files. copy: the wheel into a bucket by fastwrite, unzip+s5cmd, s5cmd, rclone, rclone-t64,
aws (azure: fastwrite, rclone); in --tools only: fastwrite-mirror, fastwrite-markers,
fastwrite-uploads-N (8 32 128 256), fastwrite-base (--base). sync: each tool's own sync first,
then again each run, which must write nothing (no PUT, POST, DELETE; no object changed).
download: the tree uploaded once, down into a folder (mtimes and modes kept counted). memory:
fastwrite's RSS over --count files of 200 bytes (80,000): extracted, mirrored, mirrored again
(nothing to do). --smoke: one round at 20 ms (sync: 0 ms), memory of 2,000 files.
"""

import contextlib
import io
import shlex
import tarfile

from harness import corpora, fixtures, report, trees
from harness.fixtures import CACHE
from harness.runner import q, shell

BUCKET, SAMPLE, T0 = "bench", "botocore/__init__.py", 1700000000


def arguments(p):
    p.add_argument("--mode", default="copy", choices=["copy", "sync", "download", "memory"])
    p.add_argument("--store", default="s3", choices=["s3", "azure", "gcs"])
    p.add_argument("--count", type=int, default=80000)
    p.add_argument("--base", help="another fastwrite binary, timed as fastwrite-base")
    p.add_argument("delays", nargs="*", default=["0", "5", "20"])


def tools(b, mode, fw, s5, wheel, tree, store):
    """The mode's tools for a store (S5: s5cmd's command with its endpoint)."""
    fw, wheel, tree, base = (q(fw), q(wheel), q(tree), b.args.base and q(fixtures.binary(b.args.base)))
    s3, down = store.kind == "s3", store.url(BUCKET, "down/")
    if mode == "sync":
        to = f"s3://{BUCKET}/sync"
        return b.wanted(
            {
                "fastwrite": lambda s: f"{fw} mirror {tree} {to}/fastwrite/",
                "s5cmd": lambda s: f"{s5} sync {tree}/ {to}/s5cmd/",
                "rclone": lambda s: f"rclone sync {tree} B:{BUCKET}/sync/rclone",
                "aws": lambda s: f"aws s3 sync --only-show-errors {tree} {to}/aws/",
            }
        )
    if mode == "download":
        out = {"fastwrite": lambda s: f"{fw} mirror {down} {q(s.out)}"}
        out |= {"s5cmd": lambda s: f"{s5} cp '{down}*' {q(s.out)}/"} if s3 else {}
        out["rclone"] = lambda s: f"rclone copy B:{BUCKET}/down {q(s.out)}"
        out["rclone-t64"] = lambda s: f"rclone copy --transfers 64 B:{BUCKET}/down {q(s.out)}"
        out |= {"aws": lambda s: f"aws s3 sync --only-show-errors {down} {q(s.out)}"} if s3 else {}
        out |= {"fastwrite-base": lambda s: f"{base} mirror {down} {q(s.out)}"} if base else {}
        return b.wanted(out)

    def url(s):
        return store.url(BUCKET, s.id + "/")

    out = {"fastwrite": lambda s: f"{fw} extract {wheel} -o {url(s)}"}
    if s3:
        up = "unzip -q {} -d {} && {} cp {}/'*' {}"
        out["unzip+s5cmd"] = lambda s: shell(up.format(wheel, q(s.out), s5, q(s.out), url(s)))
        out["s5cmd"] = lambda s: f"{s5} cp '{tree}/*' {url(s)}"
    out["rclone"] = lambda s: f"rclone copy {tree} B:{BUCKET}/{s.id}"
    out["rclone-t64"] = lambda s: f"rclone copy --transfers 64 {tree} B:{BUCKET}/{s.id}"
    if s3:
        out["aws"] = lambda s: f"aws s3 cp --recursive --only-show-errors {tree} {url(s)}"
    asked = {"fastwrite-mirror": lambda s: f"{fw} mirror {tree} {url(s)}"}
    asked["fastwrite-markers"] = lambda s: f"{fw} extract {wheel} -o {url(s)} --folder-markers"
    for n in (8, 32, 128, 256):
        asked[f"fastwrite-uploads-{n}"] = lambda s, n=n: f"{fw} extract {wheel} -o {url(s)} --uploads {n}"
    asked |= {"fastwrite-base": lambda s: f"{base} extract {wheel} -o {url(s)}"} if base else {}
    return b.wanted(out | asked, None if b.args.tools else list(out))


def small_tar(count):
    """COUNT files of 200 bytes in folders of 1,000 (mtime T0, mode 0644) as a tar, and its tree."""

    def make(part):
        with tarfile.open(part, "w") as tar:
            for i in range(count):
                if i % 1000 == 0:
                    t = tarfile.TarInfo(f"d{i // 1000:03d}")
                    t.type, t.mode, t.mtime = tarfile.DIRTYPE, 0o755, T0
                    tar.addfile(t)
                data = (f"file {i:07d} ".encode() * 16)[:199] + b"\n"
                t = tarfile.TarInfo(f"d{i // 1000:03d}/f{i % 1000:03d}.txt")
                t.size, t.mode, t.mtime = len(data), 0o644, T0
                tar.addfile(t, io.BytesIO(data))

    tar = corpora.once(CACHE / f"s3-small-{count}x200.tar", make)
    return tar, corpora.once(CACHE / f"s3-small-{count}x200", corpora.untarred(tar))


def metadata(store, key):
    return ", ".join(f"{k}: {v}" for k, v in sorted(store.head(BUCKET, key).items())) or "none"


def run(b):
    mode, kind, fw, wheel = b.args.mode, b.args.store, b.fastwrite(), corpora.wheel()
    tree = corpora.unzipped(wheel)
    want, setup, server = trees.manifest(tree)[0], {}, b.work / "server"
    text = [report.header(f"{kind} {mode}: {fixtures.version([fw, '--version'])}")]
    name = {"s3": "versitygw", "azure": "azurite", "gcs": "fake-gcs"}[kind]
    with fixtures.server(name, server) as srv:
        store = fixtures.Store(kind, srv.endpoint)
        store.make_bucket(BUCKET)
        s5 = f"{q(fixtures.s5cmd())} --log error --endpoint-url" if kind == "s3" else None
        if mode == "memory":
            return memory(b, fw, store, srv, text)
        direct = tools(b, mode, fw, f"{s5} {srv.endpoint}", wheel, tree, store)
        for tool, argv in direct.items() if mode == "sync" else ():
            # Each tool's own sync into its own prefix, straight to the server: what runs keep.
            fixtures.run(shlex.split(argv(None)), env=store.env(), timeout=b.args.timeout)
            setup[tool] = store.list(BUCKET, f"sync/{tool}/")
            if problem := trees.describe({k: v[0] for k, v in setup[tool].items()}, want):
                raise SystemExit(f"bench: the setup of {tool}'s sync: {problem}")
        if mode == "download":  # (fake-gcs-server takes none of fastwrite's uploads: rclone's)
            up = f"{q(fw)} mirror {q(tree)} {store.url(BUCKET, 'down')}"
            up = f"rclone copy --transfers 64 {q(tree)} B:{BUCKET}/down" if kind == "gcs" else up
            fixtures.run(shlex.split(up), env=store.env(), timeout=b.args.timeout)
        for delay in ["0" if mode == "sync" else "20"] if b.smoke else b.args.delays:
            with contextlib.ExitStack() as stack:
                meters, p = {"server CPU": lambda: fixtures.cpu_seconds(srv.pid)}, None
                if delay != "direct":
                    p = stack.enter_context(fixtures.proxy(srv.port, delay, b.work / f"{delay}.json"))
                    meters |= {"requests": p.requests, "proxy CPU": lambda p=p: fixtures.cpu_seconds(p.pid)}
                ep = p.endpoint if p else srv.endpoint
                ways = tools(b, mode, fw, f"{s5} {ep}", wheel, tree, store)
                rows = batch(b, mode, store, srv, ways, tree, want, setup, ep, meters, delay)
            where = f"{delay} ms each way" if p else "straight to the server (no requests counted)"
            text += ["", f"### {where}", "", report.table(rows, meters=list(meters), per=len(want))]
    first = {}
    for r in b.rows:
        first.setdefault(r["tool"], r.get("metadata") or r.get("kept") or "-")
    text += ["", f"{SAMPLE}'s metadata, or the files downloaded with their mtime and mode kept:"]
    text += ["", "| tool | after its first run |", "| --- | --- |"]
    b.save("\n".join(text + [f"| {t} | {what} |" for t, what in first.items()]))


def batch(b, mode, store, srv, ways, tree, want, setup, ep, meters, delay):
    def check(slot):
        if mode == "download":
            got, other = trees.manifest(slot.out)
            pairs = [((tree / k).stat(), (slot.out / k).stat()) for k in got if k in want]
            mtimes, modes = (
                sum(int(a.st_mtime) == int(b.st_mtime) for a, b in pairs),
                sum(a.st_mode == b.st_mode for a, b in pairs),
            )
            slot.extra["kept"] = f"mtime of {mtimes}, mode of {modes} files"
            return trees.describe(got, want, other)
        prefix = f"sync/{slot.tool}/" if mode == "sync" else slot.id + "/"
        listing = store.list(BUCKET, prefix)
        slot.extra["metadata"] = metadata(store, prefix + SAMPLE) if SAMPLE in listing else "-"
        if mode == "sync":
            if writes := {m: n for m, n in slot.extra.get("requests", {}).items() if m in ("PUT", "POST", "DELETE")}:
                return f"wrote with nothing to do: {writes}"
            if changed := sum(setup[slot.tool].get(k) != v for k, v in listing.items()):
                return f"{changed} objects rewritten since the setup"
        return trees.describe({k: v[0] for k, v in listing.items()}, want)

    def afresh(slot):  # Azurite slows as it fills: a new one before each run, behind the proxy
        fixtures.servers.stop(srv.proc)
        srv.proc, _ = fixtures.servers.start("azurite", str(b.work / "server"), srv.port)
        srv.pid = srv.proc.pid
        store.make_bucket(BUCKET)

    fresh = afresh if store.kind == "azure" else None
    return b.batch(
        f"{mode}-{delay}", ways, check, env=store.env(ep), meters=meters, before_run=fresh, make_out=mode != "sync"
    )


def memory(b, fw, store, srv, text):
    tar, tree = small_tar(2000 if b.smoke else b.args.count)
    want, fw, before = trees.tar_manifest(tar), q(fw), {}
    runs = {
        "extract": lambda s: f"{fw} extract --stats {q(tar)} -o s3://{BUCKET}/mem-extract/",
        "mirror": lambda s: f"{fw} mirror --stats {q(tree)} s3://{BUCKET}/mem-mirror/",
        "mirror-noop": lambda s: f"{fw} mirror --stats {q(tree)} s3://{BUCKET}/mem-mirror/",
    }

    def check(slot):
        prefix = "mem-extract/" if slot.tool == "extract" else "mem-mirror/"
        listing, meta = store.list(BUCKET, prefix), store.head(BUCKET, prefix + "d000/f000.txt")
        slot.extra["metadata"] = metadata(store, prefix + "d000/f000.txt")
        before.update(listing if slot.tool == "mirror" else {})
        if float(meta.get("mtime", "nan")) != T0 or int(meta.get("mode", "0")) & 0o777 != 0o644:
            return f"the sample's metadata is {meta}"
        if slot.tool == "mirror-noop" and (changed := sum(before.get(k) != v for k, v in listing.items())):
            return f"{changed} objects rewritten by a mirror with nothing to do"
        return trees.describe({k: v[0] for k, v in listing.items()}, want)

    meters = {"server CPU": lambda: fixtures.cpu_seconds(srv.pid)}
    rows = b.batch("memory", runs, check, env=store.env(), meters=meters, rounds=1, make_out=False)
    text += ["", f"### {len(want)} files of 200 bytes, straight to the server", ""]
    b.save("\n".join(text + [report.table(rows, base=None, meters=["server CPU", "metadata"])]))
