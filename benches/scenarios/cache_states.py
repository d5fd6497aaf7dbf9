"""Who pays for the kernel's write-back: fastwrite and a peer on one wheel, in four states of the page cache.

    benches/bench.py cache-states [--corpus torch] [--peer ripunzip]

Before each run: synced (sync), dirty (no sync: the last run still written back), dropped (the page cache dropped),
filled (free memory filled with clean page cache); the MiB dirty at each start kept. Root. --smoke: botocore, unzip.
"""

from pathlib import Path

from harness import corpora, fixtures, report, runner, trees

STATES = ["synced", "dirty", "dropped", "filled"]


def arguments(p):
    p.add_argument("--corpus", default="torch", choices=["botocore", "scipy", "torch", "kernel"])
    p.add_argument("--peer", default="ripunzip", choices=["ripunzip", "unzip"])


def dirty_mib():
    fields = dict(line.split(":") for line in Path("/proc/meminfo").read_text().splitlines())
    return sum(int(fields[k].split()[0]) for k in ("Dirty", "Writeback")) // 1024


def run(b):
    wheel = corpora.wheel("botocore" if b.smoke else b.args.corpus)
    peer = b.args.peer if fixtures.have(b.args.peer) or not b.smoke else "unzip"
    fw, into = b.fastwrite(), {"ripunzip": ["unzip-file"], "unzip": ["-q"]}[peer]
    tools = {
        "fastwrite": lambda s: [fw, "extract", wheel, "-o", s.out],
        peer: lambda s: [peer, *into, wheel, "-d", s.out],
    }
    text = [report.header(f"cache-states: {wheel.name}, {b.rounds} rounds"), ""]
    check = trees.check_tree(trees.zip_manifest(wheel))
    for state in STATES:

        def prepare(slot, state=state):
            if state == "dropped":
                Path("/proc/sys/vm/drop_caches").write_text("3")
            elif state == "filled":
                runner.fill_free_memory(b.work, keep_mib=512)
            slot.extra["dirty MiB"] = dirty_mib()

        # `dirty`: no sync before a run, so that it starts while the last one is written back.
        rows = b.batch(f"cache-{state}", tools, check, before_run=prepare, hot=[wheel], sync=state != "dirty")
        text += [f"### {state}", "", report.table(rows, base=peer, meters=["dirty MiB"]), ""]
    b.save("\n".join(text))
