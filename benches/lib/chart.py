#!/usr/bin/env python3
"""Usage: chart.py --out PNG [--title TEXT] RESULT.json ...

Draws the close-lab chart from close-lab.sh's own hyperfine JSON results (one file per batch,
named close-lab-<batch>-<stamp>.json, command names TOOL@LATENCY): wall time against the
emulated close latency, one line per tool, one panel per batch. The "none" runs (no preload
library at all) are drawn as hollow markers at "none", left of the preloaded 0 ms point. Log time
axis where a panel spans more than 4x (inline closes at 10 ms are ~100x the fast rows), linear
from 0 otherwise. Error bars: min-max of the runs.
"""

import argparse
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

NONE_X = -0.8  # where the no-preload runs are drawn, left of the preloaded 0 ms


def seconds(v, _pos=None):
    if v == 0:
        return "0"
    return f"{v * 1000:g} ms" if v < 1 else f"{v:g} s"


STYLE = {  # tool: (label, colour, marker, line style)
    "fw-never": ("fastwrite never (inline close)", "#d62728", "o", "-"),
    "fw-always": ("fastwrite always (close pool)", "#1f77b4", "s", "-"),
    "fw-auto": ("fastwrite auto", "#2ca02c", "D", "-"),
    "ca-fastclose": ("close_already FastClose", "#9467bd", "^", "--"),
    "ca-plain": ("plain drop (std File)", "#7f7f7f", "v", ":"),
}
TITLES = {
    "small-zip": "small: 2,000 files of 1-8 KiB, zip",
    "small-tar": "small: 2,000 files of 1-8 KiB, tar",
    "big-zip": "big: 8 files of 32 MiB, zip",
    "big-tar": "big: 8 files of 32 MiB, tar",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="")
    ap.add_argument("json", nargs="+")
    a = ap.parse_args()

    panels = []
    for path in a.json:
        m = re.match(r"close-lab-(.+)-\d{8}-\d{6}\.json$", os.path.basename(path))
        batch = m.group(1) if m else os.path.basename(path)
        data = {}
        for r in json.load(open(path))["results"]:
            tool, lat = r["command"].rsplit("@", 1)
            data.setdefault(tool, {})[lat] = r
        panels.append((batch, data))
    order = list(TITLES)
    panels.sort(key=lambda p: order.index(p[0]) if p[0] in order else len(order))

    cols = 2 if len(panels) > 1 else 1
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.6 * rows), squeeze=False)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    for ax, (batch, data) in zip(axes.flat, panels):
        xs_all = set()
        for tool, by_lat in data.items():
            label, colour, marker, ls = STYLE.get(tool, (tool, None, "x", "-"))
            pts = sorted((float(l[:-2]), r) for l, r in by_lat.items() if l != "none")
            xs = [x for x, _ in pts]
            xs_all.update(xs)
            ys = [r["mean"] for _, r in pts]
            lo = [r["mean"] - r["min"] for _, r in pts]
            hi = [r["max"] - r["mean"] for _, r in pts]
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                label=label,
                color=colour,
                marker=marker,
                linestyle=ls,
                linewidth=1.6,
                markersize=5,
                capsize=3,
            )
            if "none" in by_lat:
                r = by_lat["none"]
                ax.errorbar(
                    [NONE_X],
                    [r["mean"]],
                    yerr=[[r["mean"] - r["min"]], [r["max"] - r["mean"]]],
                    marker=marker,
                    color=colour,
                    markerfacecolor="none",
                    markersize=8,
                    linestyle="none",
                    capsize=3,
                )
        ticks = sorted(xs_all)
        ax.set_xticks([NONE_X] + ticks, ["none"] + [f"{x:g}" for x in ticks])
        ax.set_xlim(NONE_X - 0.6, max(ticks + [1]) + 0.6)
        means = [r["mean"] for by_lat in data.values() for r in by_lat.values()]
        if max(means) / min(means) > 4:  # the small corpus: 40 ms to 10 s
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
            ax.yaxis.set_minor_formatter(NullFormatter())
            scale = "log scale"
        else:  # the big corpus: everything within a few x; a linear axis from 0 shows it
            ax.set_ylim(bottom=0)
            scale = "linear"
        ax.yaxis.set_major_formatter(FuncFormatter(seconds))
        ax.set_ylabel(f"wall time per extraction ({scale})")
        ax.set_xlabel("emulated close latency per file (ms)")
        ax.set_title(TITLES.get(batch, batch), fontsize=11)
        ax.grid(True, which="major", alpha=0.4)
        ax.grid(True, which="minor", alpha=0.12)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in list(axes.flat)[1 : len(panels)]:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in labels:
                handles.append(h)
                labels.append(l)
    fig.legend(
        handles, labels, loc="lower center", ncol=min(len(labels), 3), frameon=False, fontsize=10
    )
    fig.suptitle(
        "Extraction time vs emulated close latency (lab/slowclose.c preload; hollow markers "
        'at "none": no preload)' + (f"\n{a.title}" if a.title else ""),
        fontsize=11,
    )
    legend_rows = (len(labels) + 2) // 3
    fig.tight_layout(rect=(0, 0.03 + 0.035 * legend_rows, 1, 1))
    fig.savefig(a.out, dpi=110)
    print(f"chart: wrote {a.out}")


if __name__ == "__main__":
    main()
