"""Two fastwrite binaries side by side (before and after a change), on the command line's jobs.

    benches/bench.py ab OLD NEW [-n 15] [--jobs wheel,bucket,mirror,small-zip,small-tar]
                     [--delay-ms 20]

Jobs: `wheel`, the botocore wheel (2,039 files) extracted into a folder; `bucket`, the same
wheel into a versitygw bucket behind the delay proxy at --delay-ms each way (requests counted
by the proxy); `mirror`, the small generated tree (2,000 files of 1-8 KiB) mirrored into an
empty folder; `small-zip`, `small-tar`, that tree as a zip and a tar extracted. One batch per
job, OLD and NEW alternating (each round starting with the other), each run into a fresh
folder or prefix, every output's files and sizes (or keys) checked. The report gives NEW's
median over OLD's per job: issue 53 accepts a refactor within 1.03 on wheel, bucket and mirror.
"""

from harness import corpora, fixtures, report, trees

ROUNDS = 15
ACCEPT = {"wheel": 1.03, "bucket": 1.03, "mirror": 1.03}


def arguments(p):
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--jobs", default="wheel,bucket,mirror,small-zip,small-tar")
    p.add_argument("--delay-ms", type=float, default=20)


def run(b):
    sides = {"old": fixtures.binary(b.args.old), "new": fixtures.binary(b.args.new)}
    wheel, small = corpora.wheel(), corpora.generated("small")
    want_wheel, want_small = trees.zip_manifest(wheel), trees.manifest(small / "tree")[0]
    local = {  # job: (the arguments before the output, what the output must hold)
        "wheel": (["extract", wheel, "-o"], want_wheel),
        "small-zip": (["extract", small / "corpus.zip", "-o"], want_small),
        "small-tar": (["extract", small / "corpus.tar", "-o"], want_small),
        "mirror": (["mirror", small / "tree"], want_small),
    }
    lines = [report.header(f"A/B: old {b.args.old}, new {b.args.new}, {b.rounds} rounds"), ""]
    summary = ["| job | old | new | new / old | client CPU new / old | accepted at |"]
    summary.append("| --- | ---: | ---: | ---: | ---: | --- |")
    for job in b.args.jobs.split(","):
        if job == "bucket":
            rows = bucket(b, sides, wheel, want_wheel)
        else:
            args, want = local[job]
            tools = {side: binary_with(exe, args) for side, exe in sides.items()}
            rows = b.batch(job, tools, trees.check_tree(want))
        lines += [f"### {job}", "", report.table(rows, base="old", meters=["requests"]), ""]
        med = report.medians(rows)
        if med["old"]["n"] and med["new"]["n"]:
            new_old = med["new"]["wall"] / med["old"]["wall"]
            cpu = med["new"]["cpu"] / med["old"]["cpu"] if med["old"]["cpu"] else 0
            verdict = "-"
            if job in ACCEPT:
                verdict = f"{ACCEPT[job]} ({'within' if new_old <= ACCEPT[job] else 'OVER'})"
            old, new = (report.seconds(med[side]["wall"]) for side in ("old", "new"))
            summary.append(f"| {job} | {old} | {new} | {new_old:.2f} | {cpu:.2f} | {verdict} |")
    b.save("\n".join(lines + summary))


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

            tools = {
                side: binary_with(exe, ["extract", wheel, "-o"], prefix)
                for side, exe in sides.items()
            }
            tag = f"bucket-{b.args.delay_ms:g}ms"
            meters = {"requests": p.requests}
            return b.batch(
                tag, tools, check, env=store.env(p.endpoint), meters=meters, make_out=False
            )
