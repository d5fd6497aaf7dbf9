"""What the kernel-tree rows of the matrix cannot go below here: creating the files alone, decompressing alone.

    benches/bench.py floors [create|decode ...]

create: the kernel tree with every file empty, written by fastwrite extract, GNU tar, bsdtar (of its tar), fastwrite
mirror, fcp, xcp (of the tree). decode: pigz, zstd, xz -T2 of the kernel tars and unzip -tq of the kernel zip, to
/dev/null; then inflate by pigz, libdeflate-gunzip, rapidgzip -P 1 and -P 2 (PyPI, a venv) on the .tar.gz and on the
torch wheel's 900 MB entry as a .gz. --smoke: the small generated tree, its tars and the botocore wheel.
"""

from harness import corpora, fixtures, report, trees
from harness.fixtures import CACHE
from harness.runner import q, shell


def arguments(p):
    p.add_argument("parts", nargs="*", default=["create", "decode"], help="create, decode")


def create(b):
    if b.smoke:
        tar, tree = corpora.small_tars() / "small.tar", corpora.generated("small") / "tree"
    else:
        tar, tree = corpora.skeleton()
    fw, tops, strip = b.fastwrite(), sorted(tree.iterdir()), 0 if b.smoke else 1
    tools = {
        "gnu-tar": lambda s: ["tar", "-xf", tar, "-C", s.out, f"--strip-components={strip}"],
        "bsdtar": lambda s: ["bsdtar", "-xf", tar, "-C", s.out, "--strip-components", strip],
        "fcp": lambda s: ["fcp", *tops, s.out],
        "xcp": lambda s: ["xcp", "-r", "-T", "--no-progress", tree, s.out],
        "fastwrite-mirror": lambda s: [fw, "mirror", tree, s.out],
        "fastwrite": lambda s: [fw, "extract", "--strip-components", strip, tar, "-o", s.out],
    }
    tools = {k: v for k, v in b.wanted(tools).items() if "fastwrite" in k or fixtures.have(k.replace("gnu-", ""))}
    rows = b.batch(
        "floors-create", tools, trees.check_tree(trees.manifest(tree)[0]), reference="gnu-tar", fill_memory=True
    )
    b.clean()
    return rows


def decode(b):
    tars = corpora.small_tars() if b.smoke else corpora.linux()
    stem = "small" if b.smoke else "linux"
    zip_ = corpora.wheel("botocore" if b.smoke else "kernel")
    into_null = {
        "pigz -dc (.tar.gz)": f"pigz -dc {tars / stem}.tar.gz",
        "zstd -dc (.tar.zst)": f"zstd -dc {tars / stem}.tar.zst",
        "xz -T2 -dc (.tar.xz)": f"xz -T2 -dc {tars / stem}.tar.xz",
        "unzip -tq (the zip, one core)": f"unzip -tq {q(zip_)}",
    }
    fixtures.need("libdeflate-gunzip", "apt-get install -y libdeflate-tools")
    venv = CACHE / "rapidgzip-venv"
    if not (venv / "bin" / "rapidgzip").exists():
        fixtures.run(["python3", "-m", "venv", venv])
        fixtures.run([venv / "bin" / "pip", "install", "-q", "rapidgzip==0.16.2"], timeout=1800)
    streams = {".tar.gz": tars / f"{stem}.tar.gz"}
    if not b.smoke:
        cuda = CACHE / "torch-libtorch_cuda.gz"
        streams["libtorch_cuda.so"] = corpora.entry_as_gz(corpora.wheel("torch"), "torch/lib/libtorch_cuda.so", cuda)
    for name, path in streams.items():
        into_null[f"pigz -dc ({name})"] = f"pigz -dc {q(path)}"
        into_null[f"libdeflate-gunzip -c ({name})"] = f"libdeflate-gunzip -c {q(path)}"
        for cores in (1, 2):
            into_null[f"rapidgzip -P {cores} ({name})"] = f"{venv}/bin/rapidgzip -P {cores} -d -c {q(path)}"
    tools = {k: (lambda s, c=c: shell(f"exec {c} >/dev/null")) for k, c in into_null.items()}
    hot = [tars / f"{stem}.{f}" for f in ("tar.gz", "tar.zst", "tar.xz")] + [zip_, *streams.values()]
    return b.batch("floors-decode", b.wanted(tools), hot=hot, make_out=False)


def run(b):
    text = [report.header(f"floors, {b.rounds} rounds")]
    for part in b.args.parts:
        measure = {"create": create, "decode": decode}.get(part) or exit(f"bench: no part {part}")
        text += ["", f"### {part}", "", report.table(measure(b), base=None)]
    b.save("\n".join(text))
