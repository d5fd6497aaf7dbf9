"""The benchmark matrix: every corpus against its best peer, and one table of ratios.

    benches/bench.py matrix [--docs] [ROW ...]

Rows: botocore, scipy, torch, kernel-zip (zip-peers: ripunzip); tar (bsdtar), tar.gz, tar.zst, tar.xz (the decoder
piped into tar), npm (GNU tar; tar-peers); mirror-kernel (xcp, fcp), mirror-bigfiles (cp, fcp), each with a no-op
rerun against rsync (mirror-peers): only the best peer and fastwrite, everything those scenarios check. Rounds: -n, 10
for botocore, scipy, npm; each row's outputs deleted after it (about an hour in all). --docs: the table into the
matrix markers of docs/benchmarks.md and README.md. --smoke: every row on its smoke input.
"""

import re

from harness import fixtures, report
from scenarios import mirror_peers, tar_peers, zip_peers

ROWS = {  # row: (label, scenario, its input, the best peers, rounds if not -n)
    "botocore": ("botocore wheel (2,039 files, 21 MB)", zip_peers, "botocore", "ripunzip", 10),
    "scipy": ("scipy 1.17.1 wheel (1,425 files, 114 MB)", zip_peers, "scipy", "ripunzip", 10),
    "torch": ("torch 2.5.1 wheel (11,269 files, 1.75 GB)", zip_peers, "torch", "ripunzip", None),
    "kernel-zip": ("kernel tree as zip (Info-ZIP; 78,579 files)", zip_peers, "kernel", "ripunzip", None),
    "tar": ("kernel .tar (78,579 files, 1.3 GB)", tar_peers, ("linux", "tar"), "bsdtar", None),
    "tar.gz": ("kernel .tar.gz", tar_peers, ("linux", "tar.gz"), "pigz-tar", None),
    "tar.zst": ("kernel .tar.zst", tar_peers, ("linux", "tar.zst"), "zstd-tar", None),
    "tar.xz": ("kernel .tar.xz (55 xz blocks)", tar_peers, ("linux", "tar.xz"), "xz-tar", None),
    "npm": ("@mui/icons-material tgz (43,010 files)", tar_peers, ("npm", "tar.gz"), "gnu-tar", 10),
    "mirror-kernel": ("mirror: kernel tree", mirror_peers, "kernel", "xcp,fcp", None),
    "mirror-bigfiles": ("mirror: 8 x 128 MiB", mirror_peers, "bigfiles", "cp,fcp", None),
}
NAMES = {
    **{t: f"{d} \\| tar -x" for t, d in (("pigz-tar", "pigz -dc"), ("zstd-tar", "zstd -dc"))},
    **{"xz-tar": "xz -T2 -dc \\| tar -x", "gnu-tar": "GNU tar", "cp": "cp -a", "xcp": "xcp -r"},
}
BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"
TARGET = 0.8


def arguments(p):
    p.add_argument("--docs", action="store_true", help="splice the table into the docs")
    p.add_argument("rows", nargs="*", default=list(ROWS), help=", ".join(ROWS))


def line(label, rows):
    med = report.medians(rows)
    fw = med.get("fastwrite", {})
    peers = sorted((m["wall"], t) for t, m in med.items() if t != "fastwrite" and m["n"])
    if not fw.get("n") or not peers:
        fw_time = report.seconds(fw["wall"]) if fw.get("n") else "FAILED"
        return f"| {label} | {'-' if peers else 'none ran'} | - | {fw_time} | - | - | - | - |"
    (best, peer), ratio = peers[0], fw["wall"] / peers[0][0]
    others = ", ".join(f"{NAMES.get(t, t)} {w / fw['wall']:.2f}x" for w, t in peers[1:]) or "-"
    cells = [label, NAMES.get(peer, peer), report.seconds(best), report.seconds(fw["wall"])]
    cells += [f"**{ratio:.2f}**{'' if ratio <= TARGET else ' (over)'}", others]
    cells += [f"{m['rss_kib'] / 1024:.0f} MiB" for m in (fw, med[peer])]
    return "| " + " | ".join(cells) + " |"


def run(b):
    b.args.lean, b.args.old, b.args.noop_rounds, rounds, lines = False, None, 10, b.rounds, []
    for row in b.args.rows:
        label, scenario, what, peers, row_rounds = ROWS.get(row) or exit(f"bench: no row {row}")
        b.args.tools, b.rounds = f"{peers},fastwrite", 1 if b.smoke else row_rounds or rounds
        if scenario is zip_peers:
            lines.append(line(label, zip_peers.measure(b, what)))
            b.clean()
        elif scenario is tar_peers:
            lines.append(line(label, tar_peers.measure(b, *what)))
        else:
            b.args.tools = ",".join([t for t in peers.split(",") if fixtures.have(t)] + ["fastwrite"])
            fresh, _, noop, _ = mirror_peers.measure(b, what)
            lines += [line(f"{label}, fresh", fresh), line(f"{label}, no-op rerun", noop)]
    commit = fixtures.output(["git", "-C", fixtures.REPO, "rev-parse", "--short", "HEAD"]).strip()
    binary = b.fastwrite().rsplit("-", 1)[-1]
    table = [
        report.header(f"Matrix: fastwrite {commit} (binary sha256 {binary})")
        + " Median of the runs; ratio = fastwrite / the fastest peer (below 1: fastwrite is"
        + f" faster; the target is {TARGET} or below); peak RSS = the largest of any run's.",
        "",
        "| corpus | fastest peer | peer | fastwrite | ratio | other peers | peak RSS fastwrite" + " | peak RSS peer |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
        *lines,
        "",
        '"other peers": their time over fastwrite\'s (above 1: slower than fastwrite).',
    ]
    b.save("\n".join(table))
    if b.args.docs and not b.smoke:
        block = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
        for doc in ("docs/benchmarks.md", "README.md"):
            path = fixtures.REPO / doc
            path.write_text(block.sub(lambda _: "\n".join([BEGIN, *table, END]), path.read_text()))
            fixtures.say(f"{doc}: the matrix table replaced")
