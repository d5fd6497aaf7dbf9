"""Where a file's time goes on a remote filesystem, one cost at a time, on lab/slowfs, extracting the botocore wheel.

    benches/bench.py slowfs-costs [--delay-ms 2]

1. The operations the kernel asked of the filesystem per file, each extractor on a mount with no delay (on a network
filesystem each is a round trip). 2. With one kind of operation (lookup, create, write, setattr, flush, mkdir) waiting
--delay-ms: fastwrite, --no-defer-close, -j 2, ripunzip, unzip, bsdtar. --smoke: flush alone.
"""

from harness import corpora, fixtures, report, trees

ROUNDS = 1
COSTS = ["lookup", "create", "write", "setattr", "flush", "mkdir"]
OPS = "getattr create open write flush release getxattr chmod utimens mkdir total".split()


def arguments(p):
    p.add_argument("--delay-ms", default="2")


def run(b):
    fw, wheel = b.fastwrite(), corpora.wheel()
    want = trees.zip_manifest(wheel)
    tools = {
        "fastwrite": lambda s: [fw, "extract", wheel, "-o", s.out],
        "fastwrite --no-defer-close": lambda s: [fw, "--no-defer-close", "extract", wheel, "-o", s.out],
        "fastwrite -j 2": lambda s: [fw, "-j", "2", "extract", wheel, "-o", s.out],
        "ripunzip": lambda s: ["ripunzip", "unzip-file", wheel, "-d", s.out],
        "unzip": lambda s: ["unzip", "-q", wheel, "-d", s.out],
        "bsdtar": lambda s: ["bsdtar", "-xf", wheel, "-C", s.out],
    }
    tools = b.wanted({k: v for k, v in tools.items() if k != "ripunzip" or fixtures.have(k)})
    text = [report.header(f"slowfs-costs: the botocore wheel ({len(want)} files)"), ""]
    text += ["Operations the kernel asked of the filesystem, per file:", "", "| tool | " + " | ".join(OPS) + " |"]
    text.append("| --- |" + " ---: |" * len(OPS))
    for name, tool in tools.items():
        with fixtures.mount("slowfs", b.work / f"count-{len(text)}") as m:
            b.batch(
                f"count {name}",
                {name: tool},
                trees.check_tree(want, m.backing_of),
                out_root=m.path,
                rounds=1,
                sync=False,
            )
        counts = {line.split()[0]: int(line.split()[1]) for line in m.counts.splitlines() if line.strip()}
        text.append(f"| {name} | " + " | ".join(f"{counts.get(op, 0) / len(want):.2f}" for op in OPS) + " |")
    for cost in ["flush"] if b.smoke else COSTS:
        with fixtures.mount("slowfs", b.work / f"time-{cost}", f"{cost}={b.args.delay_ms}") as m:
            rows = b.batch(
                f"{cost}={b.args.delay_ms}ms", tools, trees.check_tree(want, m.backing_of), out_root=m.path, sync=False
            )
        text += ["", f"### {cost} waits {b.args.delay_ms} ms", "", report.table(rows)]
    b.save("\n".join(text))
