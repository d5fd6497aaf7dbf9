#!/usr/bin/env python3
"""Usage: close-lab-report.py --batch NAME --files N [--fastwrite DESC] RESULT.json

Prints the markdown report of one close-lab.sh batch (hyperfine JSON whose command names are
TOOL@LATENCY, LATENCY = "none" (no preload) or "<N>ms"): mean times, ratios measured side by
side in that batch, and the issue's targets checked against them.
"""

import argparse
import json
import os

LABELS = {
    "fw-never": "fastwrite never (inline)",
    "fw-always": "fastwrite always (pool)",
    "fw-auto": "fastwrite auto",
    "ca-fastclose": "close_already FastClose",
    "ca-plain": "plain drop (std File)",
}


def lat_key(lat):
    return -1.0 if lat == "none" else float(lat[:-2])


def lat_label(lat):
    return "none" if lat == "none" else f"{lat[:-2]} ms"


def fmt_time(s):
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--files", type=int, required=True)
    ap.add_argument("--fastwrite", default="")
    ap.add_argument("json")
    a = ap.parse_args()

    res = {}
    for r in json.load(open(a.json))["results"]:
        tool, lat = r["command"].rsplit("@", 1)
        res[(tool, lat)] = r
    tools = list(dict.fromkeys(t for t, _ in res))
    lats = sorted({l for _, l in res}, key=lat_key)

    def mean(t, l):
        r = res.get((t, l))
        return r["mean"] if r else None

    def sd(t, l):
        r = res.get((t, l))
        return (r["stddev"] or 0.0) if r else None

    out = []
    p = out.append
    p(f"### close-lab {a.batch}: {a.files} files per run")
    p("")
    if a.fastwrite:
        p(
            f'fastwrite: {a.fastwrite}. "none": no preload library; "N ms": every close of a '
            "written file waits N ms (lab/slowclose.c). Mean wall time ± standard deviation "
            "(runs)."
        )
        p("")
    p("| tool | " + " | ".join(lat_label(l) for l in lats) + " |")
    p("| --- |" + " ---: |" * len(lats))
    for t in tools:
        cells = []
        for l in lats:
            r = res.get((t, l))
            cells.append(
                f"{fmt_time(r['mean'])} ± {fmt_time(r['stddev'] or 0)} ({len(r['times'])})"
                if r
                else ""
            )
        p(f"| {LABELS.get(t, t)} | " + " | ".join(cells) + " |")
    p("")

    rows = []

    def ratio_row(label, f):
        cells = []
        for l in lats:
            try:
                v = f(l)
            except (TypeError, ZeroDivisionError):
                v = None
            cells.append(f"{v:.2f}" if v is not None else "")
        if any(cells):
            rows.append(f"| {label} | " + " | ".join(cells) + " |")

    def div(x, y):
        return None if x is None or y is None else x / y

    ratio_row(
        "never / always (speed-up of the pool)",
        lambda l: div(mean("fw-never", l), mean("fw-always", l)),
    )
    ratio_row(
        "never / auto (speed-up of auto)", lambda l: div(mean("fw-never", l), mean("fw-auto", l))
    )
    ratio_row("auto / always", lambda l: div(mean("fw-auto", l), mean("fw-always", l)))
    ratio_row(
        "always vs no latency (always@L / always@none)",
        lambda l: div(mean("fw-always", l), mean("fw-always", "none")),
    )
    ratio_row(
        "auto vs no latency (auto@L / auto@none)",
        lambda l: div(mean("fw-auto", l), mean("fw-auto", "none")),
    )
    ratio_row(
        "never vs no latency (never@L / never@none)",
        lambda l: div(mean("fw-never", l), mean("fw-never", "none")),
    )
    ratio_row(
        "close_already / plain drop", lambda l: div(mean("ca-fastclose", l), mean("ca-plain", l))
    )
    ratio_row(
        "close_already / fastwrite always",
        lambda l: div(mean("ca-fastclose", l), mean("fw-always", l)),
    )
    ratio_row(
        "close_already / fastwrite auto", lambda l: div(mean("ca-fastclose", l), mean("fw-auto", l))
    )
    if rows:
        p("Ratios of means in this batch (above 1: the first is slower):")
        p("")
        p("| ratio | " + " | ".join(lat_label(l) for l in lats) + " |")
        p("| --- |" + " ---: |" * len(lats))
        out.extend(rows)
        p("")

    # The targets (stated for ~2,000 small files), where this batch has what they need.
    checks = []
    if a.files < 1000:
        p(
            f"(The issue's targets are for many small files; with {a.files} files the closes are "
            "a small share of the time, so they are not checked here.)"
        )
        p("")
    five = "5ms"
    for mode in ("fw-always", "fw-auto") if a.files >= 1000 else ():
        m5, n5, m0 = mean(mode, five), mean("fw-never", five), mean(mode, "none")
        name = LABELS[mode]
        if m5 and n5:
            r = n5 / m5
            checks.append(
                f"- 5 ms: {name} {r:.1f}x faster than never (target >= 10x): "
                f"**{'met' if r >= 10 else 'NOT met'}**"
            )
        if m5 and m0:
            r = m5 / m0
            checks.append(
                f"- 5 ms: {name} at {r:.2f}x its time with no added latency "
                f"(target <= 1.5x): **{'met' if r <= 1.5 else 'NOT met'}**"
            )
    an, nn = mean("fw-auto", "none"), mean("fw-never", "none")
    if an and nn and a.files >= 1000:
        r = an / nn
        noise = sd("fw-auto", "none") + sd("fw-never", "none")
        verdict = (
            "met" if an <= nn else ("tie within the runs' noise" if an - nn <= noise else "NOT met")
        )
        checks.append(f"- no added latency: auto / never = {r:.2f} (target <= 1): **{verdict}**")
    # Did the preload bite? Inline closes at the largest latency cannot beat files x L / writers.
    top = [l for l in lats if l != "none"]
    if top and mean("fw-never", top[-1]):
        floor = (
            a.files * lat_key(top[-1]) / 1000 / (os.cpu_count() or 1)
        )  # -j default: one writer per CPU
        if mean("fw-never", top[-1]) < 0.5 * floor:
            checks.append(
                f"- WARNING: never at {lat_label(top[-1])} took {fmt_time(mean('fw-never', top[-1]))}, "
                f"less than half of {a.files} closes x {lat_label(top[-1])} / writers: "
                "did the preload library take effect?"
            )
    if checks:
        p("Targets (issue 6):")
        p("")
        out.extend(checks)
        p("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
