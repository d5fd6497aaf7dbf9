"""Many archives in a bucket, each extracted into a prefix of its own in another, by the ways users have.

    benches/bench.py many-archives [--archives 500] [--delay-ms 20] [--python PY] [--memory N]

versitygw behind the delay proxy; seeded archives (tar.gz and zip, 10-200 small files each). Ways: fastwrite-one (one
`--per-archive` run), loop and xargs-8 (a run per archive), get+x+s5cmd (down, unpack, up: users' scripts), s5cmd-tree
(the uploads alone), dask (--python with fastwrite and distributed); each prefix must hold every file (and a record per
archive where fastwrite keeps them); then rerun, which must find nothing to do. --memory N: the peak RSS of a run over N
listed sources, --shard 0/1000. --smoke: 20 archives.
"""

import random
import sys

SEED = 7


def make_archives(root, count):
    import io
    import tarfile
    import zipfile

    rng = random.Random(SEED)
    root.mkdir()
    for i in range(count):
        files = {f"d{j % 4}/f{j:03d}.bin": rng.randbytes(rng.randint(200, 4000)) for j in range(rng.randint(10, 200))}
        if i % 2:
            with zipfile.ZipFile(root / f"shard-{i:05d}.zip", "w", zipfile.ZIP_DEFLATED) as z:
                for name, data in files.items():
                    z.writestr(zipfile.ZipInfo(name, (2023, 1, 1, 0, 0, 0)), data)
            continue
        with tarfile.open(root / f"shard-{i:05d}.tar.gz", "w:gz") as t:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), 1672531200, 0o644
                t.addfile(info, io.BytesIO(data))


def arguments(p):
    p.add_argument("--archives", type=int, default=500)
    p.add_argument("--delay-ms", default="20")
    p.add_argument("--python", help="an interpreter with fastwrite and distributed: the dask way")
    p.add_argument("--memory", type=int, help="only the memory of a run over N listed sources")


def run(b):
    from harness import fixtures, report, trees
    from harness.runner import q, shell

    fw, s5, work = q(b.fastwrite()), f"{q(fixtures.s5cmd())} --log error", b.work
    with fixtures.server("versitygw", work / "server") as srv:
        store = fixtures.Store("s3", srv.endpoint)
        for bucket in ("src", "dst"):
            store.make_bucket(bucket)
        if b.args.memory:
            return memory(b, fw, store)
        count = 20 if b.smoke else b.args.archives
        make_archives(work / "archives", count)
        fixtures.run(shell(f"{fw} extract '{work}/archives/*' --per-archive -o {work}/tree -q"))
        fixtures.delete(work / "tree/.fastwrite")
        files = len(trees.manifest(work / "tree")[0])
        fixtures.run(shell(f"{s5} cp '{work}/archives/*' s3://src/a/"), env=store.env())
        names = work / "names"
        names.write_text("".join(f"{p.name}\n" for p in sorted((work / "archives").iterdir())))
        stem = "s=${0%.gz}; s=${s%.tar}; s=${s%.zip}"  # ARCHIVE (as $0) PREFIX (as $1)
        one = f"{stem}; exec {fw} extract s3://src/a/$0 -o s3://dst/$1/$s/ -q"
        down = f"{stem}; d={work}/scratch/$1/$0; mkdir -p $d/x && {s5} cp s3://src/a/$0 $d/ && "
        down += "case $0 in *.zip) unzip -q $d/$0 -d $d/x;; *) tar -xzf $d/$0 -C $d/x;; esac && "
        down += f'{s5} cp "$d/x/*" s3://dst/$1/$s/ >/dev/null'
        ways = {
            "fastwrite-one": lambda s: f"{fw} extract 's3://src/a/*' --per-archive -o s3://dst/{s.id}/ -q",
            "loop": lambda s: shell(f"while read -r n; do bash -c {q(one)} $n {s.id} || exit 1; done <{names}"),
            "xargs-8": lambda s: shell(f"xargs -P 8 -I{{}} bash -c {q(one)} {{}} {s.id} <{names}"),
            "get+x+s5cmd": lambda s: shell(f"xargs -P 8 -I{{}} bash -c {q(down)} {{}} {s.id} <{names}"),
            "s5cmd-tree": lambda s: f"{s5} cp '{work}/tree/*' s3://dst/{s.id}/",
        }
        if b.args.python:
            ways["dask"] = lambda s: [b.args.python, __file__, s.id]

        def check(prefix, tool):
            keys = store.list("dst", f"{prefix}/")
            records = sum(1 for k in keys if k.startswith(".fastwrite/done/"))
            got = sum(1 for k in keys if not k.startswith(".fastwrite/"))
            if got != files:
                return f"{got} keys, expected {files}"
            if tool in ("fastwrite-one", "dask", "rerun") and records != count:
                return f"{records} records, expected {count}"
            return None

        with fixtures.proxy(srv.port, b.args.delay_ms, work / "proxy.json") as p:
            env, meters = store.env(p.endpoint), {"requests": p.requests}
            rows = b.batch(
                "many", b.wanted(ways), lambda s: check(s.id, s.tool), env=env, meters=meters, make_out=False
            )
            # fastwrite-one again into each of its prefixes: nothing to do.
            again = {
                "rerun": lambda s: (
                    f"{fw} extract 's3://src/a/*' --per-archive -o s3://dst/many-r{s.round}-fastwrite-one/ -q"
                )
            }
            rows += b.batch(
                "rerun",
                again,
                lambda s: check(f"many-r{s.round}-fastwrite-one", "rerun"),
                env=env,
                meters=meters,
                make_out=False,
            )
    b.save(
        report.header(f"many-archives: {count} archives, {files} files")
        + "\n\n"
        + report.table(rows, base="fastwrite-one", meters=["requests"])
    )


def memory(b, fw, store):
    """Empty objects made as files in the posix backend's folder (no request each), listed."""
    from harness import report
    from harness.runner import q

    (b.work / "server/root/src/m").mkdir()
    for i in range(b.args.memory):
        (b.work / f"server/root/src/m/s-{i:07d}.tar").touch()
    run = {
        "memory": lambda s: (
            f"{fw} extract 's3://src/m/*' --per-archive --shard 0/1000 -o s3://dst/m/ -q --report {q(s.out)}/report"
        )
    }
    rows = b.batch("memory", run, env=store.env(), rounds=1, allowed_exits={"memory": range(256)})
    taken = len((b.work / "out" / "memory-r0-memory" / "report").read_text().splitlines())
    b.failures += [] if taken else ["memory: the run reported no source (--shard 0/1000 took none?)"]
    text = f"{b.args.memory} sources listed, {taken} taken: peak RSS {rows[0]['rss_kib'] / 1024:.0f} MiB"
    b.save(report.header("many-archives --memory") + "\n\n" + text)


if __name__ == "__main__":  # the dask way's driver (its workers import this file again)
    import fastwrite.dask
    from distributed import Client, LocalCluster

    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        fastwrite.dask.extract_all(client, ["s3://src/a/*"], f"s3://dst/{sys.argv[1]}/")
