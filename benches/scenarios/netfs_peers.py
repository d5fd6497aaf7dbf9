"""fastwrite on a network filesystem for real, against its peers: sshfs through the delay proxy.

    benches/bench.py netfs-peers [--all] [DELAY_MS ...]        (default: 1 5)

lab/netfs at each delay (each way); onto it, the botocore wheel by fastwrite, -j 2, -j 16, -j 32, ripunzip (--all:
unzip, bsdtar), and its tree mirrored by fastwrite, -j 2, -j 16, cp -a (--all: rsync -a); files counted in the backing
folder. Rounds: 2 at 1 ms, 1 above. --smoke: 1 ms, fastwrite and cp -a.
"""

from harness import corpora, fixtures, report, trees

ROUNDS = 0  # by delay: 2 at 1 ms, 1 above


def arguments(p):
    p.add_argument("--all", action="store_true")
    p.add_argument("delays", nargs="*", default=["1", "5"])


def run(b):
    fw, wheel = b.fastwrite(), corpora.wheel()
    tree, want = corpora.unzipped(wheel), trees.zip_manifest(wheel)
    tools = {"fastwrite": lambda s: [fw, "extract", wheel, "-o", s.out]}
    tools |= {f"fastwrite -j {j}": (lambda s, j=j: [fw, "-j", j, "extract", wheel, "-o", s.out]) for j in (2, 16, 32)}
    tools["ripunzip"] = lambda s: ["ripunzip", "unzip-file", wheel, "-d", s.out]
    if b.args.all:
        tools["unzip"] = lambda s: ["unzip", "-q", wheel, "-d", s.out]
        tools["bsdtar"] = lambda s: ["bsdtar", "-xf", wheel, "-C", s.out]
    tools["mirror fastwrite"] = lambda s: [fw, "mirror", tree, s.out]
    tools |= {f"mirror fastwrite -j {j}": (lambda s, j=j: [fw, "-j", j, "mirror", tree, s.out]) for j in (2, 16)}
    tools["mirror cp -a"] = lambda s: ["cp", "-a", f"{tree}/.", s.out]
    if b.args.all:
        tools["mirror rsync -a"] = lambda s: ["rsync", "-a", f"{tree}/", f"{s.out}/"]
    tools = {k: v for k, v in tools.items() if k.split()[0] != "ripunzip" or fixtures.have("ripunzip")}
    tools = b.wanted(tools, ["fastwrite", "mirror cp -a"] if b.smoke else None)
    text = [report.header(f"netfs-peers: the botocore wheel ({len(want)} files) onto sshfs")]
    for delay in ["1"] if b.smoke else b.args.delays:
        with fixtures.mount("netfs", b.work / f"mnt-{delay}", delay) as m:
            rounds = b.rounds or (2 if delay == "1" else 1)
            rows = b.batch(
                f"netfs-{delay}ms",
                tools,
                trees.check_tree(want, m.backing_of),
                out_root=m.path,
                rounds=rounds,
                sync=False,
            )
        text += ["", f"### sshfs, {delay} ms each way", "", report.table(rows)]
    b.save("\n".join(text))
