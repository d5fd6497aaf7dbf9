"""Two fastwrite binaries side by side (before and after a change), on the command line's jobs.

    benches/bench.py ab OLD NEW [-n 15] [--jobs wheel,bucket,mirror,small-zip,small-tar,holding] [--delay-ms 20]
                     [--on local,slowfs,netfs] [--archives 300]

wheel: the botocore wheel into a folder; bucket: into versitygw behind the delay proxy (requests counted); many: a run
of many archives (--archives, half .tar.gz, half zip, 10-200 small files each) from one bucket into another, one
`--per-archive` run, behind the same proxy (issue 64: a 1.43x regression there went unseen by the others); mirror: the
small generated tree (2,000 files) into an empty folder; small-zip, small-tar: that tree as a zip, a tar; holding: the
wheel into a folder that holds a file (issue 28's renames). --on: this disk, lab/slowfs, lab/netfs (1 ms). OLD and NEW
alternate, every output checked; issue 53 accepts a refactor within 1.03 on wheel, bucket and mirror (the summary says).
"""

import contextlib

from harness import corpora, fixtures, report, trees

ROUNDS = 15
ACCEPT = {"wheel": 1.03, "bucket": 1.03, "mirror": 1.03, "many": 1.03}


def arguments(p):
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--jobs", default="wheel,bucket,many,mirror,small-zip,small-tar")
    p.add_argument("--archives", type=int, default=300, help="the many job's archives")
    p.add_argument("--delay-ms", type=float, default=20)
    p.add_argument("--on", default="local", help="local, slowfs, netfs")


def run(b):
    sides = {"old": fixtures.binary(b.args.old), "new": fixtures.binary(b.args.new)}
    wheel, small = corpora.wheel(), corpora.generated("small")
    want_wheel, want_small = trees.zip_manifest(wheel), trees.manifest(small / "tree")[0]
    local = {  # job: (the arguments before the output, what the output must hold)
        "wheel": (["extract", wheel, "-o"], want_wheel),
        "holding": (["extract", wheel, "-o"], want_wheel | {"mine.txt": 5}),
        "small-zip": (["extract", small / "corpus.zip", "-o"], want_small),
        "small-tar": (["extract", small / "corpus.tar", "-o"], want_small),
        "mirror": (["mirror", small / "tree"], want_small),
    }
    lines = [report.header(f"A/B: old {b.args.old}, new {b.args.new}, {b.rounds} rounds"), ""]
    summary = ["| job | old | new | new / old | client CPU new / old | accepted at |"]
    summary.append("| --- | ---: | ---: | ---: | ---: | --- |")
    for place in b.args.on.split(","):
        with contextlib.ExitStack() as stack:
            mnt = None
            if place != "local":
                delay = ["1"] if place == "netfs" else []
                mnt = stack.enter_context(fixtures.mount(place, b.work / f"mnt-{place}", *delay))
            for job in b.args.jobs.split(","):
                tag = job if place == "local" else f"{job}-on-{place}"
                if job in ("bucket", "many"):
                    if place == "local":
                        rows = bucket(b, sides, wheel, want_wheel) if job == "bucket" else many(b, sides)
                        summary.append(line(job, rows, lines))
                    continue
                args, want = local[job]
                tools = {side: binary_with(exe, args) for side, exe in sides.items()}
                check = trees.check_tree(want, mnt.backing_of if mnt else lambda p: p)
                root = mnt.path if mnt else None
                rows = b.batch(tag, tools, check, out_root=root, before_run=holding if job == "holding" else None)
                summary.append(line(tag, rows, lines))
    b.save("\n".join(lines + summary))


def holding(slot):
    """A folder that holds a file of the user's before the run."""
    (slot.out / "mine.txt").write_text("mine\n")


def line(job, rows, lines):
    """The job's table into LINES; its summary line."""
    lines += [f"### {job}", "", report.table(rows, base="old", meters=["requests"]), ""]
    med = report.medians(rows)
    if not (med["old"]["n"] and med["new"]["n"]):
        return f"| {job} | FAILED | | | | |"
    new_old = med["new"]["wall"] / med["old"]["wall"]
    cpu = med["new"]["cpu"] / med["old"]["cpu"] if med["old"]["cpu"] else 0
    accept = ACCEPT.get(job)
    verdict = f"{accept} ({'within' if new_old <= accept else 'OVER'})" if accept else "-"
    old, new = (report.seconds(med[side]["wall"]) for side in ("old", "new"))
    return f"| {job} | {old} | {new} | {new_old:.2f} | {cpu:.2f} | {verdict} |"


def binary_with(exe, args, into=lambda slot: slot.out):
    return lambda slot: [exe, *args, into(slot)]


def bucket(b, sides, wheel, want):
    """The wheel into a bucket of versitygw behind the delay proxy."""
    with fixtures.server("versitygw", b.work / "versitygw") as s:
        store = fixtures.Store("s3", s.endpoint)
        store.make_bucket("bench")
        with fixtures.proxy(s.port, b.args.delay_ms, b.work / "proxy.json") as p:

            def prefix(slot):
                return store.url("bench", slot.id + "/")

            def check(slot):
                got = {k: v[0] for k, v in store.list("bench", slot.id + "/").items()}
                return trees.describe(got, want)

            tools = {side: binary_with(exe, ["extract", wheel, "-o"], prefix) for side, exe in sides.items()}
            tag = f"bucket-{b.args.delay_ms:g}ms"
            meters = {"requests": p.requests}
            return b.batch(tag, tools, check, env=store.env(p.endpoint), meters=meters, make_out=False)


def many(b, sides):
    """Many archives from a bucket of versitygw into another, one `--per-archive` run, behind the delay proxy."""
    from harness.runner import q, shell
    from scenarios import many_archives

    count = 20 if b.smoke else b.args.archives
    work = b.work / "many"
    work.mkdir()
    many_archives.make_archives(work / "archives", count)
    fixtures.run([sides["old"], "extract", f"{work}/archives/*", "--per-archive", "-o", work / "tree", "-q"])
    fixtures.delete(work / "tree/.fastwrite")
    files = len(trees.manifest(work / "tree")[0])
    with fixtures.server("versitygw", work / "server") as s:
        store = fixtures.Store("s3", s.endpoint)
        for bucket in ("src", "dst"):
            store.make_bucket(bucket)
        s5 = f"{q(fixtures.s5cmd())} --log error"
        fixtures.run(shell(f"{s5} cp '{work}/archives/*' s3://src/a/"), env=store.env())
        with fixtures.proxy(s.port, b.args.delay_ms, b.work / "proxy-many.json") as p:

            def check(slot):
                keys = store.list("dst", slot.id + "/")
                records = sum(1 for k in keys if k.startswith(".fastwrite/done/"))
                got = sum(1 for k in keys if not k.startswith(".fastwrite/"))
                if got != files or records != count:
                    return f"{got} keys and {records} records, expected {files} and {count}"
                return None

            def tool(exe):
                return lambda slot: [exe, "extract", "s3://src/a/*", "--per-archive", "-o", f"s3://dst/{slot.id}/", "-q"]

            tools = {side: tool(exe) for side, exe in sides.items()}
            tag = f"many-{count}-{b.args.delay_ms:g}ms"
            meters = {"requests": p.requests}
            return b.batch(tag, tools, check, env=store.env(p.endpoint), meters=meters, make_out=False)
