#!/usr/bin/env python3
"""The benchmark matrix's table (benches/matrix.sh).

matrix-table.py LOG --title TEXT > TABLE.md
    LOG: ROW<TAB>TAG<TAB>HYPERFINE_JSON lines; each JSON may have a .rss.json twin
    (lib/batch.sh, BENCH_RSS=1). One table line per batch: fastwrite's mean time, the
    fastest other tool's, their ratio, and both tools' peak RSS (the largest of any run).
matrix-table.py --splice DOC TABLE.md
    Replaces what lies between the matrix markers in DOC with TABLE.md.
"""

import json
import re
import sys

BEGIN, END = "<!-- matrix:begin -->", "<!-- matrix:end -->"

ROWS = {
    "botocore": "botocore wheel (2,039 files, 21 MB)",
    "scipy": "scipy 1.17.1 wheel (1,425 files, 114 MB)",
    "torch": "torch 2.5.1 wheel (11,269 files, 1.75 GB)",
    "kernel-zip": "kernel tree as zip (Info-ZIP; 78,579 files)",
    "tar": "kernel .tar (78,579 files, 1.3 GB)",
    "tar.gz": "kernel .tar.gz",
    "tar.zst": "kernel .tar.zst",
    "tar.xz": "kernel .tar.xz (55 xz blocks)",
    "npm": "@mui/icons-material tgz (43,010 files)",
    "mirror-kernel": "mirror: kernel tree, fresh",
    "mirror-bigfiles": "mirror: 8 x 128 MiB, fresh",
}
NOOP = {
    "mirror-kernel": "mirror: kernel tree, no-op rerun",
    "mirror-bigfiles": "mirror: 8 x 128 MiB, no-op rerun",
}
TOOLS = {
    "pigz-tar": "pigz -dc \\| tar -x",
    "zstd-tar": "zstd -dc \\| tar -x",
    "xz-tar": "xz -T2 -dc \\| tar -x",
    "gnu-tar": "GNU tar",
    "cp": "cp -a",
    "rsync": "rsync -a",
    "xcp": "xcp -r",
}
TARGET = 0.8


def seconds(t):
    return f"{t:.3f} s" if t >= 1 else f"{t * 1000:.0f} ms"


def mib(kib):
    return "?" if kib is None else f"{kib / 1024:.0f} MiB"


def table(log, title):
    out = [
        f"Matrix: {title}. Mean of the timed runs; ratio = fastwrite / the fastest peer "
        f"(below 1: fastwrite is faster; the target is {TARGET} or below); peak RSS = the largest "
        "of any run's (warmup included; fastwrite's includes the pages of an archive it maps).",
        "",
        "| corpus | fastest peer | peer | fastwrite | ratio | other peers | peak RSS fastwrite | peak RSS peer |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for line in open(log):
        if not line.strip():
            continue
        row, tag, path = line.rstrip("\n").split("\t")
        results = json.load(open(path))["results"]
        try:
            rss = json.load(open(path[: -len(".json")] + ".rss.json"))["peak_rss_per_run"]
        except FileNotFoundError:
            rss = {}
        fw = [r for r in results if r["command"] == "fastwrite"]
        peers = sorted(
            (r for r in results if not r["command"].startswith("fastwrite")),
            key=lambda r: r["mean"],
        )
        if not fw or not peers:
            print(f"matrix-table: {tag}: no fastwrite row or no peer in {path}", file=sys.stderr)
            sys.exit(1)
        fw, best = fw[0], peers[0]
        ratio = fw["mean"] / best["mean"]
        label = NOOP.get(row, row) if tag.endswith("-noop") else ROWS.get(row, row)
        name = lambda r: TOOLS.get(r["command"], r["command"])  # noqa: E731
        others = ", ".join(f"{name(r)} {r['mean'] / fw['mean']:.2f}x" for r in peers[1:]) or "-"
        peak = lambda r: max(rss.get(r["command"], []), default=None)  # noqa: E731
        mark = "" if ratio <= TARGET else " (over)"
        out.append(
            f"| {label} | {name(best)} | {seconds(best['mean'])} | {seconds(fw['mean'])} | "
            f"**{ratio:.2f}**{mark} | {others} | {mib(peak(fw))} | {mib(peak(best))} |"
        )
    out.append("")
    out.append('"other peers": their time over fastwrite\'s (above 1: slower than fastwrite).')
    return "\n".join(out) + "\n"


def splice(doc, table_path):
    text = open(doc).read()
    new = open(table_path).read()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        sys.exit(f"matrix-table: no {BEGIN} ... {END} markers in {doc}")
    text = pattern.sub(lambda _: f"{BEGIN}\n{new}{END}", text)
    open(doc, "w").write(text)


def main(argv):
    if argv[:1] == ["--splice"] and len(argv) == 3:
        splice(argv[1], argv[2])
    elif len(argv) == 3 and argv[1] == "--title":
        sys.stdout.write(table(argv[0], argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
