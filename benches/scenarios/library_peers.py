"""A program writing ~2,300 small files (a UFO font's shape) four ways, at emulated close latencies.

    benches/bench.py library-peers [--latencies none,1,5,10] [--files 2300] [--old CHECKOUT]

benches/library-ways (built here): std-loop, rayon-std, close-already (FastClose, as norad writes a UFO), fastwrite
(Batch::write); --old CHECKOUT's library-ways as fastwrite-old. A batch per latency (lab/slowclose.c; none: no
preload), every run's files those of an untimed std-loop run. --smoke: none and 5 ms, 300 files.
"""

import os

from harness import fixtures, report, trees
from harness.fixtures import CACHE
from scenarios.close_lab import env

WAYS = ["std-loop", "rayon-std", "close-already", "fastwrite"]


def arguments(p):
    p.add_argument("--latencies", default="none,1,5,10")
    p.add_argument("--files", type=int, default=2300)
    p.add_argument("--old", help="a checkout of an earlier fastwrite: its library-ways, timed too")


def build(checkout, name):
    """CHECKOUT's benches/library-ways, built (release, its target folder in the cache): a copy."""
    target = CACHE / f"{name}-target"
    cargo = ["cargo", "build", "--release", "--quiet", "--manifest-path", f"{checkout}/benches/library-ways/Cargo.toml"]
    fixtures.run(cargo, env={**os.environ, "CARGO_TARGET_DIR": str(target)}, timeout=3600)
    return fixtures.binary(target / "release" / "library-ways", name)


def run(b):
    lib, files = fixtures.lab_build(), 300 if b.smoke else b.args.files
    ways = {w: [build(fixtures.REPO, "library-ways"), w] for w in WAYS}
    if b.args.old:
        ways["fastwrite-old"] = [build(b.args.old, "library-ways-old"), "fastwrite"]
    reference = b.work / "reference"
    fixtures.run([*ways["std-loop"], reference, files])
    want, _ = trees.manifest(reference)
    text = [report.header(f"library-peers: {files} files, {b.rounds} rounds")]
    summary = ["| latency | " + " | ".join(ways) + " | fastwrite vs close-already | vs rayon-std |"]
    summary.append("| --- |" + " ---: |" * (len(ways) + 2))
    for lat in ["none", "5"] if b.smoke else b.args.latencies.split(","):
        tools = {w: (lambda s, c=c, lat=lat: env(lib, lat) + c + [s.out, files]) for w, c in ways.items()}
        rows = b.batch(f"library-{lat}", b.wanted(tools), trees.check_tree(want), reference=reference)
        text += ["", f"### {lat} ms", "", report.table(rows)]
        med = {t: m["wall"] for t, m in report.medians(rows).items() if m["n"]}
        if {"fastwrite", "close-already", "rayon-std"} <= med.keys():
            cells = [report.seconds(med[w]) if w in med else "-" for w in ways]
            cells += [f"{med['close-already'] / med['fastwrite']:.2f}x", f"{med['rayon-std'] / med['fastwrite']:.2f}x"]
            summary.append(f"| {lat} | " + " | ".join(cells) + " |")
    b.save("\n".join(text + ["", "Medians, and the others' over fastwrite's:", "", *summary]))
