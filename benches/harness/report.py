"""One report for every bench: per tool, the median of its good runs (a median, since on these
machines one run in a batch can take twice the others), its ratio to a base tool's side by side,
the client's CPU (user + system, its children's included) and peak RSS, and what the meters
counted (requests by method from the delay proxy, a server's CPU), as the markdown tables that
docs/benchmarks.md quotes. Ratios above 1: slower than the base.
"""

import datetime
import os
import statistics


def seconds(t):
    return f"{t:.3f} s" if t >= 1 else f"{t * 1000:.1f} ms"


def header(what):
    """The line that opens a report: what ran, where, when."""
    when = datetime.date.today()
    return f"{what}; {when}, {os.cpu_count()} cores, {os.uname().release}."


def medians(rows):
    """{tool: its good runs' medians} of one batch's rows (warmup rounds left out)."""
    by = {}
    for r in rows:
        if not r["warmup"]:
            by.setdefault(r["tool"], []).append(r)
    out = {}
    for tool, runs in by.items():
        good = [r for r in runs if r["status"] == "ok"]
        m = {"n": len(good), "of": len(runs), "runs": [r["wall"] for r in good]}
        if good:
            for k, v in good[0].items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "round":
                    m[k] = statistics.median(r[k] for r in good)
                else:
                    m.setdefault(k, v)  # counts, notes: the first good run's
        out[tool] = m
    return out


def cell(v):
    if isinstance(v, dict):
        return ", ".join(f"{k} {n}" for k, n in sorted(v.items(), key=lambda kv: -kv[1])) or "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def table(rows, base="fastwrite", meters=(), per=None):
    """The markdown table of one batch: each tool's median wall time and its ratio to BASE's
    (None: no ratios), client CPU (and per object, given PER objects a run) and its ratio, peak
    RSS, and the METERS' columns."""
    med = medians(rows)
    b = med.get(base) if med.get(base, {}).get("n") else None
    ratio_to = [f"/ {base}"] if base else []
    cols = ["tool", "good runs", "wall", *ratio_to, "client CPU", *(["per object"] if per else [])]
    cols += [*ratio_to, "peak RSS", *meters]
    lines = ["| " + " | ".join(cols) + " |", "| --- |" + " ---: |" * (len(cols) - 1)]
    for tool, m in med.items():
        name = tool.replace("|", "\\|")
        if not m["n"]:
            lines.append(f"| {name} | 0 of {m['of']} | FAILED |" + " |" * (len(cols) - 3))
            continue
        cells = [name, f"{m['n']} of {m['of']}", seconds(m["wall"])]
        cells += [f"{m['wall'] / b['wall']:.2f}" if b else "-"] if base else []
        cells += [seconds(m["cpu"])] + ([f"{m['cpu'] / per * 1e6:.0f} µs"] if per else [])
        cells += [f"{m['cpu'] / b['cpu']:.2f}" if b and b["cpu"] else "-"] if base else []
        cells += [f"{m['rss_kib'] / 1024:.0f} MiB"] + [cell(m.get(k, "-")) for k in meters]
        lines.append("| " + " | ".join(cells) + " |")
    bad = [f"- {r['tool']} r{r['round']}: {r['status']}" for r in rows if r["status"] != "ok"]
    return "\n".join(lines + (["", "Failed runs:", *bad] if bad else []))


def ratio(rows, a, b):
    """A's median wall time over B's in ROWS, or None."""
    med = medians(rows)
    if med.get(a, {}).get("n") and med.get(b, {}).get("n"):
        return med[a]["wall"] / med[b]["wall"]
    return None
