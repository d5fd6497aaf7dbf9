"""The close modes when closing a written file is slow (Defender, NFS, FUSE), emulated by the lab's preload library,
against close_already's FastClose; and the floor of hiding slow closes.

    benches/bench.py close-lab [--latencies 0,1,5,10] [--no-baseline] [--chart PNG]
                               [small-zip small-tar big-zip big-tar floor]

lab/slowclose.c makes every close of a written file wait FASTWRITE_LAB_CLOSE_MS. Per generated corpus (small: 2,000
files of 1-8 KiB; big: 8 of 32 MiB) and format: --defer-close never, always, auto at each latency and without the
preload (none), all through `env`; zip batches also run benches/close-already-baseline (FastClose, a plain drop). The
report: times, ratios, issue 6's targets, the chart (docs/close-latency.png; matplotlib in a venv). floor: lab/floor.c's
model of perfect deferral beside fastwrite auto. --smoke: the small batches and the floor at 0 and 5 ms, no chart.
"""

import json
import os

from harness import corpora, fixtures, report, trees
from harness.fixtures import BUILT, CACHE

MODES = ["never", "always", "auto"]
LABELS = {
    "never": "fastwrite never (inline)",
    "always": "fastwrite always (pool)",
    "auto": "fastwrite auto",
    "ca-fastclose": "close_already FastClose",
    "ca-plain": "plain drop (std File)",
}
# A / B at each latency; B@none: at no latency.
RATIOS = "never/always never/auto auto/always always/always@none auto/auto@none never/never@none"
RATIOS = (RATIOS + " ca-fastclose/ca-plain ca-fastclose/always ca-fastclose/auto").split()


def arguments(p):
    p.add_argument("--latencies", default="0,1,5,10")
    p.add_argument("--no-baseline", action="store_true")
    p.add_argument("--chart", default=str(fixtures.REPO / "docs/close-latency.png"))
    p.add_argument("batches", nargs="*", default="small-zip small-tar big-zip big-tar floor".split())


def env(lib, lat):
    if lat == "none":
        return ["env", "-u", "LD_PRELOAD"]
    return ["env", f"LD_PRELOAD={lib}", f"FASTWRITE_LAB_CLOSE_MS={lat}"]


def grid(rows):
    """{(tool, latency): median wall}, and the latencies in order."""
    med = {tuple(t.rsplit("@", 1)): m["wall"] for t, m in report.medians(rows).items() if m["n"]}
    return med, sorted({lat for _, lat in med}, key=lambda v: -1 if v == "none" else float(v))


def batch_report(name, files, rows):
    med, lats = grid(rows)
    head = ["| ms | " + " | ".join(lats) + " |", "| --- |" + " ---: |" * len(lats)]
    text = [f"### close-lab {name}: {files} files a run", ""] + head
    for t in dict.fromkeys(t for t, _ in med):
        times = [report.seconds(med[t, x]) if (t, x) in med else "" for x in lats]
        text.append(f"| {LABELS.get(t, t)} | " + " | ".join(times) + " |")
    text += ["", "Ratios of medians (above 1: the first is slower):", ""] + head
    for ratio in RATIOS:
        a, b = ratio.split("/")
        b, at = (b.split("@") + [None])[:2]
        cells = [f"{med[a, x] / med[b, at or x]:.2f}" if {(a, x), (b, at or x)} <= med.keys() else "" for x in lats]
        text += [f"| {ratio} | " + " | ".join(cells) + " |"] if any(cells) else []
    if files >= 1000 and {("never", "5"), ("never", "none")} <= med.keys():  # issue 6's targets
        text += ["", "Targets (issue 6, for many small files):"]
        for m in ("always", "auto"):
            speedup, cost = med["never", "5"] / med[m, "5"], med[m, "5"] / med[m, "none"]
            text.append(f"- 5 ms: {m} {speedup:.1f}x faster than never (target: 10 or more),")
            text.append(f"  at {cost:.2f}x its time without latency (target: 1.5 or less)")
        auto_never = med["auto", "none"] / med["never", "none"]
        text.append(f"- no added latency: auto / never = {auto_never:.2f} (target: 1 or less)")
    return "\n".join(text + [""])


def chart(b, panels):
    venv = CACHE / "venv-chart"
    if not (venv / "bin" / "python").exists():
        fixtures.run(["python3", "-m", "venv", venv])
        fixtures.run([venv / "bin" / "pip", "install", "-q", "matplotlib"], timeout=1800)
    data = {name: {f"{t}@{x}": v for (t, x), v in grid(rows)[0].items()} for name, rows in panels.items()}
    spec = b.work / "chart.json"
    spec.write_text(json.dumps({"panels": data, "labels": LABELS, "out": b.args.chart}))
    fixtures.run([venv / "bin" / "python", fixtures.REPO / "benches/harness/chart.py", spec])


def baseline_binary():
    """benches/close-already-baseline, built with cargo (its target folder in the cache)."""
    target = CACHE / "close-already-baseline-target"
    manifest = fixtures.REPO / "benches/close-already-baseline/Cargo.toml"
    cargo = ["cargo", "build", "--release", "--quiet", "--manifest-path", manifest]
    fixtures.run(cargo, env={**os.environ, "CARGO_TARGET_DIR": str(target)}, timeout=3600)
    return target / "release" / "close-already-baseline"


def run(b):
    lib, fw = fixtures.lab_build(), b.fastwrite()
    lats = ["none"] + (["0", "5"] if b.smoke else b.args.latencies.split(","))
    baseline = None if b.args.no_baseline else baseline_binary()
    text, panels = [report.header(f"close-lab: fastwrite {fw}, {b.rounds} rounds")], {}
    for name in b.args.batches:
        if b.smoke and name.startswith("big"):
            continue
        if name == "floor":
            text.append(floor(b, lib, fw, lats))
            continue
        kind, fmt = name.split("-")
        corpus = corpora.generated(kind)
        files, size = map(int, (corpus / "manifest").read_text().split())
        a = corpus / f"corpus.{fmt}"
        base = {m: [fw, "--defer-close", m, "extract", a, "-o"] for m in MODES}
        if baseline and fmt == "zip":
            base |= {"ca-fastclose": [baseline, "fast-close", a], "ca-plain": [baseline, "plain", a]}
        tools = {
            f"{t}@{lat}": (lambda s, c=c, lat=lat: env(lib, lat) + c + [s.out]) for lat in lats for t, c in base.items()
        }
        check, tree = trees.check_count(files, size), corpus / "tree"
        rows = b.batch(f"close-lab-{name}", b.wanted(tools), check, reference=tree, fill_memory=kind == "big")
        text.append(batch_report(name, files, rows))
        panels[name] = rows
        if kind == "big":
            b.clean()  # few inodes: deleting them costs the next batch's creates nothing
    if panels and b.args.chart and not b.smoke:
        chart(b, panels)
    b.save("\n".join(text))


def floor(b, lib, fw, lats):
    corpus = corpora.generated("small")
    a, files, writers = (corpus / "corpus.zip", int((corpus / "manifest").read_text().split()[0]), os.cpu_count())
    calibrate = {"auto": lambda s: [fw, "extract", a, "-o", s.out]}
    work_us = round(
        report.medians(b.batch("floor-calibrate", calibrate, rounds=1 if b.smoke else 5))["auto"]["cpu"] * 1e6 / files
    )
    tools = {}
    for lat in lats:
        # As many close threads as auto would start (Little's law, + 1, at most 256).
        ms = 0 if lat == "none" else float(lat)
        threads = 0 if lat == "none" else min(256, -(-writers * ms * 1000 // work_us) + 1)
        tools[f"floor@{lat}"] = lambda s, ms=ms, n=int(threads): [BUILT / "floor", files, writers, work_us, ms, n]
        tools[f"auto@{lat}"] = lambda s, lat=lat: env(lib, lat) + [fw, "extract", a, "-o", s.out]
    checks = {t: trees.check_count(files) if t.startswith("auto") else lambda s: None for t in tools}
    med, lats = grid(b.batch("floor", tools, checks))
    text = [f"### The floor: {files} files, {work_us} µs of CPU each, {writers} writers", ""]
    text += ["| ms | " + " | ".join(lats) + " |", "| --- |" + " ---: |" * len(lats)]
    for tool in ("floor", "auto"):
        text.append(f"| {tool} | " + " | ".join(report.seconds(med[tool, x]) for x in lats) + " |")
        text.append(f"| {tool} / none | " + " | ".join(f"{med[tool, x] / med[tool, 'none']:.2f}" for x in lats) + " |")
    return "\n".join(text + [""])
