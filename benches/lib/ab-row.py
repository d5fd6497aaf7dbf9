#!/usr/bin/env python3
"""One table row of an old/new comparison run in both orders (benches/ab.sh, crash-safety.sh).

  ab-row.py [--stddev] CASE FIRST.json SECOND.json

FIRST.json is hyperfine's export of a batch that ran "old" then "new", SECOND.json of one that
ran "new" then "old". Fails if any run exited non-zero. Prints
  | CASE | old | new | new/old | new | old | new/old | both orders: new/old |
each time a mean in ms (with --stddev: "mean ± stddev", to a tenth of a ms).
"""

import json
import sys

args = sys.argv[1:]
stddev = args[:1] == ["--stddev"]
if stddev:
    args = args[1:]
case, paths = args[0], args[1:]
runs = [{x["command"]: x for x in json.load(open(p))["results"]} for p in paths]
for r in runs:
    for x in r.values():
        if any(c != 0 for c in x.get("exit_codes", [])):
            sys.exit(f"non-zero exit in {case} {x['command']}")


def cell(x):
    if stddev:
        return f"{x['mean'] * 1000:.1f} ± {x['stddev'] * 1000:.1f} ms"
    return f"{x['mean'] * 1000:.0f} ms"


first, second = runs
both = sum(r["new"]["mean"] for r in runs) / sum(r["old"]["mean"] for r in runs)
print(
    f"| {case} | {cell(first['old'])} | {cell(first['new'])} | {first['new']['mean'] / first['old']['mean']:.2f}"
    f" | {cell(second['new'])} | {cell(second['old'])} | {second['new']['mean'] / second['old']['mean']:.2f} | {both:.2f} |"
)
