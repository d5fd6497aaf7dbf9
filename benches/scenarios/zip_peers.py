"""fastwrite against the zip extractors people use: unzip, bsdtar, 7z, ripunzip.

    benches/bench.py zip-peers [--corpus botocore|scipy|torch|kernel] [--lean] [--old BINARY]

The botocore wheel (2,039 files), the scipy wheel (114 MB out), the torch wheel (1.75 GB out, one entry of 900 MB) or
the kernel tree zipped by Info-ZIP. fastwrite and --no-defer-close, --old as fastwrite-old, the peers installed
(--lean: the best one); every tree the zip's files, unzip's bytes. --smoke: the botocore wheel.
"""

from harness import corpora, fixtures, report, trees

ROUNDS = 10


def arguments(p):
    p.add_argument("--corpus", default="botocore", choices=["botocore", "scipy", "torch", "kernel"])
    p.add_argument("--lean", action="store_true", help="only the best peer and fastwrite")
    p.add_argument("--old", help="a second fastwrite binary, timed as fastwrite-old")


def tools(b, archive):
    fw, a = b.fastwrite(), archive
    peers = {
        "unzip": lambda s: ["unzip", "-q", a, "-d", s.out],
        "bsdtar": lambda s: ["bsdtar", "-xf", a, "-C", s.out],
        "7z": lambda s: ["7z", "x", "-y", f"-o{s.out}", a],
        "ripunzip": lambda s: ["ripunzip", "unzip-file", a, "-d", s.out],
    }
    if b.args.lean:
        peers = {k: v for k, v in peers.items() if k == ("ripunzip" if fixtures.have("ripunzip") else "unzip")}
    out = {k: v for k, v in peers.items() if fixtures.have(k)}
    if not b.args.lean:
        out["fastwrite-no-defer-close"] = lambda s: [fw, "--no-defer-close", "extract", a, "-o", s.out]
    if b.args.old:
        old = fixtures.binary(b.args.old)
        out["fastwrite-old"] = lambda s: [old, "extract", a, "-o", s.out]
    out["fastwrite"] = lambda s: [fw, "extract", a, "-o", s.out]
    return out


def measure(b, corpus):
    """One batch on CORPUS: its rows (the matrix's zip rows too)."""
    archive = corpora.wheel("botocore" if b.smoke else corpus)
    check = trees.check_tree(trees.zip_manifest(archive))
    return b.batch(f"zip-peers-{corpus}", b.wanted(tools(b, archive)), check, reference="unzip", hot=[archive])


def run(b):
    rows = measure(b, b.args.corpus)
    b.save(report.header(f"zip-peers: {b.args.corpus}, {b.rounds} rounds") + "\n\n" + report.table(rows))
