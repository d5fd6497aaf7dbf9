"""fastwrite against GNU tar, bsdtar and each format's decoder piped into tar.

    benches/bench.py tar-peers [--corpus linux|npm] [--lean] [--old BINARY] [tar tar.gz tar.zst tar.xz]

Debian's kernel source (78,579 files) or an npm tarball (43,010 small files, no folder entries), a batch per format,
its outputs deleted after it. Tools: gnu-tar, bsdtar, pigz-tar, zstd-tar, xz-tar, fastwrite and --no-defer-close,
--old as fastwrite-old (--lean: GNU tar, the decoder, fastwrite); every tree the tar's files, GNU tar's bytes.
--smoke: the small generated tree in each format.
"""

from harness import corpora, fixtures, report, trees
from harness.runner import q, shell

DECODERS = {"tar.gz": ("pigz-tar", "pigz -dc"), "tar.zst": ("zstd-tar", "zstd -dc"), "tar.xz": ("xz-tar", "xz -dc -T2")}


def arguments(p):
    p.add_argument("--corpus", default="linux", choices=["linux", "npm"])
    p.add_argument("--lean", action="store_true")
    p.add_argument("--old", help="a second fastwrite binary, timed as fastwrite-old")
    p.add_argument("formats", nargs="*", default=["tar", "tar.gz", "tar.zst", "tar.xz"])


def tools(b, a, fmt):
    fw = b.fastwrite()
    out = {"gnu-tar": lambda s: ["tar", "-xf", a, "-C", s.out]}
    if not b.args.lean and fixtures.have("bsdtar"):
        out["bsdtar"] = lambda s: ["bsdtar", "-xf", a, "-C", s.out]
    if fmt in DECODERS:
        name, decoder = DECODERS[fmt]
        out[name] = lambda s: shell(f"{decoder} {q(a)} | tar -x -C {q(s.out)}")
    if not b.args.lean:
        out["fastwrite-no-defer-close"] = lambda s: [fw, "--no-defer-close", "extract", a, "-o", s.out]
    if b.args.old:
        old = fixtures.binary(b.args.old)
        out["fastwrite-old"] = lambda s: [old, "extract", a, "-o", s.out]
    out["fastwrite"] = lambda s: [fw, "extract", a, "-o", s.out]
    return out


def measure(b, corpus, fmt):
    """One batch of one format: its rows (the matrix's tar rows too)."""
    folder, stem = (corpora.small_tars(), "small") if b.smoke else (getattr(corpora, corpus)(), corpus)
    archive = folder / f"{stem}.{fmt}"
    check = trees.check_tree(trees.tar_manifest(folder / f"{stem}.tar"))
    rows = b.batch(
        f"tar-peers-{corpus}-{fmt}", b.wanted(tools(b, archive, fmt)), check, reference="gnu-tar", hot=[archive]
    )
    b.clean()
    return rows


def run(b):
    text = [report.header(f"tar-peers: {b.args.corpus}, {b.rounds} rounds")]
    for fmt in b.args.formats:
        text += ["", f"### .{fmt}", "", report.table(measure(b, b.args.corpus, fmt))]
    b.save("\n".join(text))
