"""Into and out of object storage: fastwrite against the tools users have, on the tests' servers.

    benches/bench.py s3 [--mode copy|sync|download|memory] [--store s3|azure|gcs] [--count N]
                        [--base BINARY] [DELAY_MS|direct ...]         (default: 0 5 20)

The server (lab/servers.py, as the tests start it): versitygw (posix backend), Azurite (in
memory, started afresh before every run: it slows as it fills) or fake-gcs-server (in memory),
behind the delay proxy at DELAY_MS each way, which counts the requests (`direct`: no proxy, no
counts). The corpus: the botocore wheel (2,039 files) and its tree. Every run into a fresh
prefix or folder, and what it left (listed straight from the server) must be exactly the tree's
files and sizes. Modes:
  copy      the wheel into a bucket: fastwrite extract; unzip+s5cmd, s5cmd, rclone (4
            transfers), rclone-t64, aws (the tree); azure: fastwrite, rclone, rclone-t64; named
            in --tools only: fastwrite-mirror, fastwrite-markers (a `dir/` marker per folder),
            fastwrite-uploads-N (N in 8 32 128 256), fastwrite-base (--base)
  sync      a mirror with nothing to do: each tool's own sync into its own prefix first
            (untimed, straight to the server), then again each run, which must write nothing (no
            PUT, POST or DELETE; no object's ETag or LastModified changed): fastwrite mirror,
            s5cmd sync, rclone sync, aws s3 sync
  download  the tree, uploaded once (fastwrite mirror; gcs: rclone), down into a fresh folder:
            fastwrite mirror, s5cmd cp, rclone copy, rclone-t64, aws s3 sync (gcs: fastwrite and
            rclone); the files whose mtime and mode are the tree's are counted
  memory    fastwrite's peak RSS with many keys, straight to the server: a tar of --count files
            of 200 bytes (default 80,000) extracted, its tree mirrored, and mirrored again (which
            must change nothing); each run's sample object carries the file's mtime and mode
--smoke: copy and download at 20 ms, sync at 0 ms, memory of 2,000 files; one round.
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


def copy_tools(b, fw, s5, wheel, tree, store):
    fw, wheel, tree = q(fw), q(wheel), q(tree)

    def url(s):
        return store.url(BUCKET, s.id + "/")

    tools = {"fastwrite": lambda s: f"{fw} extract {wheel} -o {url(s)}"}
    if store.kind == "s3":
        tools["unzip+s5cmd"] = lambda s: shell(
            f"unzip -q {wheel} -d {q(s.out)} && {s5} cp {q(s.out)}/'*' {url(s)}"
        )
        tools["s5cmd"] = lambda s: f"{s5} cp '{tree}/*' {url(s)}"
    tools["rclone"] = lambda s: f"rclone copy {tree} B:{BUCKET}/{s.id}"
    tools["rclone-t64"] = lambda s: f"rclone copy --transfers 64 {tree} B:{BUCKET}/{s.id}"
    if store.kind == "s3":
        tools["aws"] = lambda s: f"aws s3 cp --recursive --only-show-errors {tree} {url(s)}"
    asked = {"fastwrite-mirror": lambda s: f"{fw} mirror {tree} {url(s)}"}
    asked["fastwrite-markers"] = lambda s: f"{fw} extract {wheel} -o {url(s)} --folder-markers"
    for n in (8, 32, 128, 256):
        asked[f"fastwrite-uploads-{n}"] = lambda s, n=n: (
            f"{fw} extract {wheel} -o {url(s)} --uploads {n}"
        )
    if b.args.base:
        base = q(fixtures.binary(b.args.base))
        asked["fastwrite-base"] = lambda s: f"{base} extract {wheel} -o {url(s)}"
    return b.wanted(tools | asked, None if b.args.tools else list(tools))


def sync_tools(fw, s5, tree):
    fw, tree, to = q(fw), q(tree), f"s3://{BUCKET}/sync"
    return {
        "fastwrite": lambda s: f"{fw} mirror {tree} {to}/fastwrite/",
        "s5cmd": lambda s: f"{s5} sync {tree}/ {to}/s5cmd/",
        "rclone": lambda s: f"rclone sync {tree} B:{BUCKET}/sync/rclone",
        "aws": lambda s: f"aws s3 sync --only-show-errors {tree} {to}/aws/",
    }


def download_tools(b, fw, s5, store):
    fw, down = q(fw), store.url(BUCKET, "down/")
    tools = {"fastwrite": lambda s: f"{fw} mirror {down} {q(s.out)}"}
    if store.kind == "s3":
        tools["s5cmd"] = lambda s: f"{s5} cp '{down}*' {q(s.out)}/"
    tools["rclone"] = lambda s: f"rclone copy B:{BUCKET}/down {q(s.out)}"
    tools["rclone-t64"] = lambda s: f"rclone copy --transfers 64 B:{BUCKET}/down {q(s.out)}"
    if store.kind == "s3":
        tools["aws"] = lambda s: f"aws s3 sync --only-show-errors {down} {q(s.out)}"
    if b.args.base:
        base = q(fixtures.binary(b.args.base))
        tools["fastwrite-base"] = lambda s: f"{base} mirror {down} {q(s.out)}"
    return b.wanted(tools)


def small_tar(count):
    """COUNT files of 200 bytes in folders of 1,000 (mtime 1700000000, mode 0644), and its tree."""

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

    def untar(part):
        part.mkdir()
        fixtures.run(["tar", "-xf", tar, "-C", part])

    tar = corpora.once(CACHE / f"s3-small-{count}x200.tar", make)
    return tar, corpora.once(CACHE / f"s3-small-{count}x200", untar)


def run(b):
    mode, kind, fw = b.args.mode, b.args.store, b.fastwrite()
    wheel = corpora.wheel()
    tree = corpora.unzipped(wheel)
    want = trees.manifest(tree)[0]
    name = {"s3": "versitygw", "azure": "azurite", "gcs": "fake-gcs"}[kind]
    text = [
        report.header(f"{kind} {mode}: {fixtures.version([fw, '--version'])}, {b.rounds} rounds")
    ]
    with fixtures.server(name, b.work / "server") as srv:
        store = fixtures.Store(kind, srv.endpoint)
        store.make_bucket(BUCKET)
        s5 = (
            f"{q(fixtures.s5cmd())} --endpoint-url {srv.endpoint} --log error"
            if kind == "s3"
            else None
        )
        if mode == "memory":
            return memory(b, fw, store, srv, text)
        setup = {}
        for tool, argv in (sync_tools(fw, s5, tree) if mode == "sync" else {}).items():
            # Each tool's own sync into its own prefix, straight to the server: what runs keep.
            fixtures.run(shlex.split(argv(None)), env=store.env(), timeout=b.args.timeout)
            setup[tool] = store.list(BUCKET, f"sync/{tool}/")
            if problem := trees.describe({k: v[0] for k, v in setup[tool].items()}, want):
                raise SystemExit(f"bench: the setup of {tool}'s sync: {problem}")
        if mode == "download":  # (fake-gcs-server takes none of fastwrite's uploads: rclone's)
            up = (
                f"rclone copy --transfers 64 {q(tree)} B:{BUCKET}/down"
                if kind == "gcs"
                else f"{q(fw)} mirror {q(tree)} {store.url(BUCKET, 'down')}"
            )
            fixtures.run(shlex.split(up), env=store.env(), timeout=b.args.timeout)
        for delay in ["0" if mode == "sync" else "20"] if b.smoke else b.args.delays:
            with contextlib.ExitStack() as stack:
                p = None
                if delay != "direct":
                    p = stack.enter_context(
                        fixtures.proxy(srv.port, delay, b.work / f"proxy-{delay}.json")
                    )
                ep = p.endpoint if p else srv.endpoint
                meters = {"server CPU": lambda: fixtures.cpu_seconds(srv.pid)}
                if p:
                    meters |= {
                        "requests": p.requests,
                        "proxy CPU": lambda p=p: fixtures.cpu_seconds(p.pid),
                    }
                s5 = s5 and s5.replace(srv.endpoint, ep)
                rows = batch(
                    b, mode, store, srv, fw, s5, wheel, tree, want, setup, ep, meters, delay
                )
                s5 = s5 and s5.replace(ep, srv.endpoint)
            where = (
                "straight to the server (no requests counted)"
                if delay == "direct"
                else f"{delay} ms each way"
            )
            text += ["", f"### {where}", "", report.table(rows, meters=list(meters), per=len(want))]
        first = {}
        for r in b.rows:
            first.setdefault(r["tool"], r.get("metadata") or r.get("kept") or "-")
        text += ["", f"{SAMPLE}'s metadata, or the files downloaded whose mtime and mode are kept:"]
        text += ["", "| tool | after its first run |", "| --- | --- |"]
        text += [f"| {tool} | {what} |" for tool, what in first.items()]
    b.save("\n".join(text))


def metadata(store, key):
    meta = store.head(BUCKET, key)["Metadata"]
    return ", ".join(f"{k}: {v}" for k, v in sorted(meta.items())) or "none"


def batch(b, mode, store, srv, fw, s5, wheel, tree, want, setup, ep, meters, delay):
    env, tag = store.env(ep), f"{mode}-{delay}"
    if mode == "download":

        def check(slot):
            got, other = trees.manifest(slot.out)
            pairs = [((tree / k).stat(), (slot.out / k).stat()) for k in got if k in want]
            mtimes = sum(int(a.st_mtime) == int(b.st_mtime) for a, b in pairs)
            slot.extra["kept"] = (
                f"mtime of {mtimes}, mode of {sum(a.st_mode == b.st_mode for a, b in pairs)} files"
            )
            return trees.describe(got, want, other)

        return b.batch(tag, download_tools(b, fw, s5, store), check, env=env, meters=meters)

    def check(slot):
        prefix = f"sync/{slot.tool}/" if mode == "sync" else slot.id + "/"
        listing = store.list(BUCKET, prefix)
        if slot.tool == "fastwrite-markers":  # the folders' `dir/` markers, each empty
            listing = {k: v for k, v in listing.items() if not (k.endswith("/") and v[0] == 0)}
        slot.extra["metadata"] = metadata(store, prefix + SAMPLE) if SAMPLE in listing else "-"
        if mode == "sync":
            if writes := {
                m: n
                for m, n in slot.extra.get("requests", {}).items()
                if m in ("PUT", "POST", "DELETE")
            }:
                return f"wrote with nothing to do: {writes}"
            if changed := sum(1 for k, v in listing.items() if setup[slot.tool].get(k) != v):
                return f"{changed} objects rewritten since the setup"
        return trees.describe({k: v[0] for k, v in listing.items()}, want)

    def afresh(slot):  # Azurite slows as it fills: a new one before each run, behind the proxy
        fixtures.servers.stop(srv.proc)
        srv.proc, _ = fixtures.servers.start("azurite", str(b.work / "server"), srv.port)
        srv.pid = srv.proc.pid
        store.make_bucket(BUCKET)

    tools = (
        sync_tools(fw, s5, tree) if mode == "sync" else copy_tools(b, fw, s5, wheel, tree, store)
    )
    fresh = afresh if store.kind == "azure" else None
    return b.batch(
        tag, tools, check, env=env, meters=meters, before_run=fresh, make_out=mode == "copy"
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
        listing = store.list(BUCKET, prefix)
        meta = store.head(BUCKET, prefix + "d000/f000.txt")["Metadata"]
        slot.extra["metadata"] = metadata(store, prefix + "d000/f000.txt")
        if slot.tool == "mirror":
            before.update(listing)
        if float(meta.get("mtime", "nan")) != T0 or int(meta.get("mode", "0")) & 0o777 != 0o644:
            return f"the sample's metadata is {meta}"
        if slot.tool == "mirror-noop" and (
            changed := sum(1 for k, v in listing.items() if before.get(k) != v)
        ):
            return f"{changed} objects rewritten by a mirror with nothing to do"
        return trees.describe({k: v[0] for k, v in listing.items()}, want)

    meters = {"server CPU": lambda: fixtures.cpu_seconds(srv.pid)}
    rows = b.batch("memory", runs, check, env=store.env(), meters=meters, rounds=1, make_out=False)
    text += ["", f"### {len(want)} files of 200 bytes, straight to the server", ""]
    b.save("\n".join(text + [report.table(rows, base=None, meters=["server CPU", "metadata"])]))
