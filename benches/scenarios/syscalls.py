"""System calls per file, counted by `strace -f -c`: a measure the machine's noise leaves alone.

    benches/bench.py syscalls [zip|mirror] [--subtree fs] [--top 15]

zip: each extractor on the botocore wheel; mirror: a fresh copy of a kernel subtree (default fs/:
2,078 files) by fastwrite mirror, cp -a, rsync -a, xcp, fcp (mirror-peers' forms). Every output
holds its input's files (a copy: its bytes). The calls per file of each tool, then fastwrite's
busiest. --smoke: mirror copies the small generated tree.
"""

from pathlib import Path

from harness import corpora, fixtures, trees
from harness.runner import q

ROUNDS = 1


def arguments(p):
    p.add_argument("mode", nargs="?", default="zip", choices=["zip", "mirror"])
    p.add_argument("--subtree", default="fs")
    p.add_argument("--top", type=int, default=15)


def parse(path):
    """({call: (calls, errors)}, total) from strace -c's table."""
    calls, total = {}, 0
    for f in (line.split() for line in path.read_text().splitlines()):
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] == "total":
            total = int(f[3])
        elif len(f) >= 5 and f[0][0].isdigit():
            calls[f[-1]] = (int(f[3]), int(f[4]) if len(f) == 6 else 0)
    return calls, total


def run(b):
    fixtures.need("strace", "apt-get install -y strace")
    fw, out = q(b.fastwrite()), "{0}"  # (the output folder, filled in per run)
    if b.args.mode == "zip":
        src, a = None, q(corpora.wheel())
        want = trees.zip_manifest(corpora.wheel())
        forms = {"fastwrite": f"{fw} extract {a} -o {out}", "unzip": f"unzip -q {a} -d {out}"}
        forms |= {"fastwrite-no-defer-close": f"{fw} --no-defer-close extract {a} -o {out}"}
        forms |= {"bsdtar": f"bsdtar -xf {a} -C {out}", "7z": f"7z x -y -o{out} {a}"}
        forms |= {"ripunzip": f"ripunzip unzip-file {a} -d {out}"}
    else:
        src = corpora.generated("small") / "tree" if b.smoke else corpora.tree("kernel") / b.args.subtree
        want, tops = trees.manifest(src)[0], " ".join(q(p) for p in sorted(src.iterdir()))
        forms = {"fastwrite": f"{fw} mirror {q(src)} {out}", "cp": f"cp -a {q(src)}/. {out}"}
        forms |= {"fastwrite-no-defer-close": f"{fw} --no-defer-close mirror {q(src)} {out}"}
        forms |= {"rsync": f"rsync -a {q(src)}/ {out}/", "fcp": f"fcp {tops} {out}"}
        forms |= {"xcp": f"xcp -r -T --no-progress {q(src)} {out}"}
    forms = {k: v for k, v in b.wanted(forms).items() if "fastwrite" in k or fixtures.have(k)}
    trace = "strace -f -c -S calls -o {0}.strace "
    tools = {k: (lambda s, v=v: (trace + v).format(q(s.out))) for k, v in forms.items()}
    checks = trees.check_tree(want)

    def check(slot):
        return checks(slot) or (src and trees.same_content(src, slot.out))

    rows = b.batch(f"syscalls-{b.args.mode}", tools, check)
    text = [f"Syscalls per file ({len(want)} files)", "", "| tool | syscalls | failed | per file |"]
    text.append("| --- | ---: | ---: | ---: |")
    busiest = []
    for r in (r for r in rows if r["status"] == "ok"):
        calls, total = parse(Path(f"{r['out']}.strace"))
        failed = sum(e for _, e in calls.values())
        text.append(f"| {r['tool']} | {total} | {failed} | {total / len(want):.2f} |")
        if r["tool"] == "fastwrite":
            busiest = sorted(calls.items(), key=lambda kv: -kv[1][0])[: b.args.top]
    text += ["", "fastwrite's busiest calls:", "", "| call | calls | errors | per file |"]
    text += ["| --- | ---: | ---: | ---: |"]
    b.save("\n".join(text + [f"| {c} | {n} | {e} | {n / len(want):.2f} |" for c, (n, e) in busiest]))
