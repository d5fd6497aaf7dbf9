"""`fastwrite mirror` against cp -a, rsync -a, xcp and fcp: a fresh copy, and a no-op rerun.

    benches/bench.py mirror-peers [--noop-rounds 10] [bigfiles|kernel|small ...]

bigfiles (8 x 128 MiB), kernel (78,579 files, 56 symlinks). Fresh: a new empty folder each run (each tool in the form
that fills it), free memory filled with clean page cache first; every copy's files, cp's bytes against the tree, the
others' against cp's, each first copy's metadata against the tree (strict for cp and fastwrite). No-op: rsync and
fastwrite onto cp's copy, which no run may change. --smoke: the small generated tree.
"""

from harness import corpora, fixtures, report, trees

STRICT = {"cp", "fastwrite", "fastwrite-no-defer-close"}


def arguments(p):
    p.add_argument("--noop-rounds", type=int, default=10)
    p.add_argument("trees", nargs="*", default=["bigfiles", "kernel"], help="or small (--smoke's)")


def fresh_tools(b, src):
    fw, tops = b.fastwrite(), sorted(src.iterdir())
    out = {"cp": lambda s: ["cp", "-a", f"{src}/.", s.out], "rsync": lambda s: ["rsync", "-a", f"{src}/", f"{s.out}/"]}
    if fixtures.have("xcp"):
        out["xcp"] = lambda s: ["xcp", "-r", "-T", "--no-progress", src, s.out]
    if fixtures.have("fcp"):  # fcp copies a source into a folder as DIR/ITS NAME, even SRC/.
        out["fcp"] = lambda s: ["fcp", *tops, s.out]
    out["fastwrite-no-defer-close"] = lambda s: [fw, "--no-defer-close", "mirror", src, s.out]
    out["fastwrite"] = lambda s: [fw, "mirror", src, s.out]
    return out


def measure(b, name, noop=("rsync", "fastwrite")):
    """The fresh batch on tree NAME, then the no-op batch of NOOP tools: their rows."""
    src = corpora.generated("small") / "tree" if name == "small" or b.smoke else corpora.tree(name)
    want, links = trees.manifest(src)
    tools = b.wanted(fresh_tools(b, src))
    need = int(fixtures.output(["du", "-sk", src]).split()[0]) * (b.rounds + b.args.warmup) * len(tools)
    free = int(fixtures.output(["df", "-Pk", b.work]).splitlines()[1].split()[3])
    if free < need + (2 << 20):
        raise SystemExit(f"bench: {name}: the outputs need {need >> 20} GiB, {free >> 20} GiB free")

    def check(slot):
        got, other = trees.manifest(slot.out)
        return trees.describe(got, want) or (f"{other} links, expected {links}" if other != links else None)

    rows = b.batch(f"mirror-{name}", tools, check, reference="cp", fill_memory=True)
    first = {r["tool"]: r["out"] for r in reversed(rows) if r["status"] == "ok"}
    table, failures = trees.fidelity(src, first, STRICT)
    failures += [p for p in [trees.same_content(src, first["cp"])] if p] if "cp" in first else []
    b.failures += failures
    copy = first.get("cp") or first.get("fastwrite")
    if not copy or not noop:
        return rows, table, [], {}
    fw, snaps, touched = b.fastwrite(), {}, {}
    tools = {
        "rsync": lambda s: ["rsync", "-a", f"{src}/", f"{copy}/"],
        "fastwrite": lambda s: [fw, "mirror", src, copy],
    }

    def snapshot(slot):
        snaps[slot.id] = trees.snapshot(copy)

    def unchanged(slot):
        replaced, touched[slot.tool], added, removed = trees.changed(copy, snaps.pop(slot.id))
        return f"{replaced} replaced, {added} added, {removed} removed" if replaced or added or removed else None

    exact(b, src, copy, "before")
    tools, rounds = {k: tools[k] for k in noop}, 1 if b.smoke else b.args.noop_rounds
    noop_rows = b.batch(f"mirror-{name}-noop", tools, unchanged, before_run=snapshot, rounds=rounds, make_out=False)
    exact(b, src, copy, "after")
    b.clean()
    return rows, table, noop_rows, touched


def exact(b, src, copy, when):
    """The no-op batch's copy must be the source's, in content and in every bit of metadata."""
    name = f"the copy {when} the no-op batch"
    b.failures += trees.fidelity(src, {name: copy}, {name})[1] + [p for p in [trees.same_content(src, copy)] if p]


def run(b):
    text = [report.header(f"mirror-peers, {b.rounds} rounds")]
    for name in ["small"] if b.smoke else b.args.trees:
        rows, table, noop, touched = measure(b, name)
        text += ["", f"### {name}: fresh copy", "", report.table(rows), "", "Metadata:", "", table]
        text += ["", f"### {name}: no-op rerun", "", report.table(noop), ""]
        text += [f"Entries a run touched (same inode, new ctime): {touched}"]
    b.save("\n".join(text))
