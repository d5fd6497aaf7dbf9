"""The close-lab chart (docs/close-latency.png): wall time against the emulated close latency, a
line per tool, a panel per batch, the runs without the preload as hollow markers at `none`. Run
by scenarios/close_lab.py with matplotlib from a venv of its own (the harness needs none)."""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NONE_X = -0.8  # where the runs without the preload are drawn, left of the preloaded 0 ms
with open(sys.argv[1]) as f:
    spec = json.load(f)
panels = spec["panels"]
cols = 2 if len(panels) > 1 else 1
rows = (len(panels) + cols - 1) // cols
fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 4.6 * rows), squeeze=False)
for ax in axes.flat[len(panels) :]:
    ax.set_visible(False)
for ax, (name, data) in zip(axes.flat, panels.items(), strict=False):
    by = {}
    for key, wall in data.items():
        tool, lat = key.rsplit("@", 1)
        by.setdefault(tool, {})[lat] = wall
    for tool, points in by.items():
        xs = sorted((float(lat), wall) for lat, wall in points.items() if lat != "none")
        (line,) = ax.plot([x for x, _ in xs], [w for _, w in xs], marker="o", label=spec["labels"].get(tool, tool))
        if "none" in points:
            ax.plot([NONE_X], [points["none"]], marker="o", markerfacecolor="none", color=line.get_color())
    walls = list(data.values())
    if max(walls) / min(walls) > 4:  # inline closes at 10 ms are ~100x the fast rows
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(name)
    ax.set_xlabel("emulated close latency per file (ms); none: no preload")
    ax.set_ylabel("wall time per extraction (s)")
    ax.grid(True, alpha=0.4)
    ax.legend(fontsize=8)
fig.suptitle("Extraction time against emulated close latency (lab/slowclose.c)")
fig.tight_layout()
fig.savefig(spec["out"], dpi=110)
print(f"chart: {spec['out']}")
