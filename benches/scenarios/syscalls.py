"""System calls per file, counted by `strace -f -c`: a measure the machine's noise leaves alone.

    benches/bench.py syscalls [zip|mirror] [--subtree fs] [--top 15]

zip: each extractor on the botocore wheel (fastwrite, --no-defer-close, unzip, bsdtar, ripunzip,
7z); mirror: a fresh copy of a kernel subtree (--subtree, default fs/: 2,078 files) by fastwrite
mirror (and --no-defer-close), cp -a, rsync -a, xcp, fcp, in mirror-peers' forms. Every output
holds its input's files (and, for a copy, its bytes). Prints the calls per file of each tool,
then fastwrite's --top busiest calls. --smoke: mirror copies the small generated tree.
"""

from pathlib import Path

from harness import corpora, fixtures, trees

ROUNDS = 1


def arguments(p):
    p.add_argument("mode", nargs="?", default="zip", choices=["zip", "mirror"])
    p.add_argument("--subtree", default="fs")
    p.add_argument("--top", type=int, default=15)


def parse(path):
    """({call: (calls, errors)}, total) from strace -c's table."""
    calls, total = {}, 0
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit():
            if f[-1] == "total":
                total = int(f[3])
            else:
                calls[f[-1]] = (int(f[3]), int(f[4]) if len(f) == 6 else 0)
    return calls, total


def run(b):
    fw = b.fastwrite()
    fixtures.need("strace", "apt-get install -y strace")
    if b.args.mode == "zip":
        a = corpora.wheel()
        want, check = trees.zip_manifest(a), None
        tools = {
            "fastwrite": lambda s: [fw, "extract", a, "-o", s.out],
            "fastwrite-no-defer-close": lambda s: [
                fw,
                "--no-defer-close",
                "extract",
                a,
                "-o",
                s.out,
            ],
            "unzip": lambda s: ["unzip", "-q", a, "-d", s.out],
            "bsdtar": lambda s: ["bsdtar", "-xf", a, "-C", s.out],
            "ripunzip": lambda s: ["ripunzip", "unzip-file", a, "-d", s.out],
            "7z": lambda s: ["7z", "x", "-y", f"-o{s.out}", a],
        }
    else:
        src = (
            corpora.generated("small") / "tree"
            if b.smoke
            else corpora.tree("kernel") / b.args.subtree
        )
        want, tops = trees.manifest(src)[0], sorted(src.iterdir())
        tools = {
            "fastwrite": lambda s: [fw, "mirror", src, s.out],
            "fastwrite-no-defer-close": lambda s: [fw, "--no-defer-close", "mirror", src, s.out],
            "cp": lambda s: ["cp", "-a", f"{src}/.", s.out],
            "rsync": lambda s: ["rsync", "-a", f"{src}/", f"{s.out}/"],
            "xcp": lambda s: ["xcp", "-r", "-T", "--no-progress", src, s.out],
            "fcp": lambda s: ["fcp", *tops, s.out],
        }

        def check(slot):
            return trees.same_content(src, slot.out)

    tools = {
        k: v for k, v in b.wanted(tools).items() if k.startswith("fastwrite") or fixtures.have(k)
    }
    traced = {
        k: (lambda s, v=v: ["strace", "-f", "-c", "-S", "calls", "-o", f"{s.out}.strace", *v(s)])
        for k, v in tools.items()
    }
    checks = trees.check_tree(want)
    busiest, rows = (
        [],
        b.batch(
            f"syscalls-{b.args.mode}", traced, lambda s: checks(s) or (check(s) if check else None)
        ),
    )
    text = [
        f"Syscalls per file ({len(want)} files)",
        "",
        "| tool | syscalls | failed | per file |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        if r["status"] == "ok":
            calls, total = parse(Path(f"{r['out']}.strace"))
            failed = sum(e for _, e in calls.values())
            text.append(f"| {r['tool']} | {total} | {failed} | {total / len(want):.2f} |")
            if r["tool"] == "fastwrite":
                busiest = sorted(calls.items(), key=lambda kv: -kv[1][0])[: b.args.top]
    text += [
        "",
        "fastwrite's busiest calls:",
        "",
        "| call | calls | errors | per file |",
        "| --- | ---: | ---: | ---: |",
    ]
    text += [f"| {c} | {n} | {e} | {n / len(want):.2f} |" for c, (n, e) in busiest]
    b.save("\n".join(text))
