"""The Python package against what a Python program does without it, one process per run.

    benches/bench.py python-peers [--python PY] [--tasks wheel,ufo] [--kernel] [FS ...]

FS: local, slowfs-N, netfs-N (default: local slowfs-1 slowfs-5 netfs-1).

Tasks: `wheel`, the botocore wheel by fastwrite.extract, zipfile.extractall, shutil.unpack_archive;
`ufo`, 3,366 small files of a UFO font's shape from one thread by fastwrite.Batch.write,
Batch.open, a plain open/write loop, ThreadPoolExecutor(32); `kernel` (--kernel, local only),
Debian's kernel .tar.gz by fastwrite.extract, tarfile and shutil (filter="data"). On each FS:
this disk, lab/slowfs with N ms in every FLUSH (each close), sshfs through the delay proxy at N
ms each way. Interpreter start-up is in every run, the same for every way. The package is built
from ./python into a venv in the cache (a release build), unless --python names an interpreter
that has it. --smoke: local, one round. This file is also the ways themselves: `PY
python_peers.py WAY WHAT OUT` (no harness imported: the way's own cost only).
"""

import os
import sys

WAYS = {
    "wheel": ["fastwrite", "zipfile", "shutil"],
    "ufo": ["batch", "batch-open", "loop", "threads32"],
}
WAYS["kernel"] = ["fastwrite", "tarfile", "shutil"]
UFO_FILES = 3366


def glyphs(n):
    """N files of a UFO's shape (glyphs/NAME.glif of 1-8 KiB, deterministic), made before the
    clock matters to the way (180 outlines, each glyph its own header around one)."""
    outlines = [
        "".join(
            f'    <point x="{(k * 7 + p * 13) % 1000}" y="{(k * 11 + p * 17) % 1000}"/>\n'
            for p in range(20 + k)
        )
        for k in range(180)
    ]
    files = [("metainfo.plist", b"<?xml version='1.0'?><plist><dict/></plist>\n")]
    for i in range(n - 1):
        xml = f'<?xml version="1.0"?>\n<glyph name="g{i}">\n  <advance width="{500 + i % 300}"/>\n'
        files.append(
            (
                f"glyphs/g{i:05d}.glif",
                (xml + f"  <outline>\n{outlines[(i * 37) % 180]}  </outline>\n</glyph>\n").encode(),
            )
        )
    return files


def write_one(out, item):
    with open(os.path.join(out, item[0]), "wb") as f:
        f.write(item[1])


def way(name, what, out):
    """One way, in this process; raises on any failure."""
    if name in ("fastwrite", "zipfile", "tarfile", "shutil"):
        import shutil
        import tarfile
        import zipfile

        if name == "fastwrite":
            import fastwrite

            return fastwrite.extract(what, out)
        if name == "zipfile":
            with zipfile.ZipFile(what) as z:
                return z.extractall(out)
        if name == "tarfile":
            with tarfile.open(what) as t:
                return t.extractall(out, filter="data")
        zip_ = what.endswith((".zip", ".whl"))  # unpack_archive knows no .whl by name
        return shutil.unpack_archive(
            what, out, **({"format": "zip"} if zip_ else {"filter": "data"})
        )
    files = glyphs(int(what))
    if name in ("loop", "threads32"):
        os.makedirs(os.path.join(out, "glyphs"), exist_ok=True)
        if name == "loop":
            return [write_one(out, f) for f in files]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(32) as pool:
            return list(pool.map(lambda f: write_one(out, f), files))  # re-raises a failure
    import fastwrite

    with fastwrite.Batch(out) as batch:
        for path, data in files:
            if name == "batch":
                batch.write(path, data)
            else:
                with batch.open(path) as f:
                    f.write(data)


def arguments(p):
    p.add_argument(
        "--python", help="an interpreter with the fastwrite package (default: build one)"
    )
    p.add_argument("--tasks", default="wheel,ufo")
    p.add_argument("--kernel", action="store_true")
    p.add_argument("fs", nargs="*", default=["local", "slowfs-1", "slowfs-5", "netfs-1"])


def run(b):
    import contextlib

    from harness import corpora, fixtures, report, trees

    py = b.args.python
    if not py:
        venv = fixtures.CACHE / "python-venv"
        if not (venv / "bin" / "python").exists():
            fixtures.run([sys.executable, "-m", "venv", venv])
        fixtures.run(
            [
                venv / "bin" / "pip",
                "install",
                "-q",
                "--force-reinstall",
                "--no-deps",
                fixtures.REPO / "python",
            ],
            timeout=7200,
        )
        py = venv / "bin" / "python"
    wheel, tasks = corpora.wheel(), b.args.tasks.split(",") + (["kernel"] if b.args.kernel else [])
    inputs = {
        "wheel": wheel,
        "ufo": UFO_FILES,
        "kernel": corpora.linux() / "linux.tar.gz" if "kernel" in tasks else None,
    }
    text = [report.header(f"python-peers: {py}")]
    for fs in ["local"] if b.smoke else b.args.fs:
        with contextlib.ExitStack() as stack:
            m = None
            if fs != "local":
                kind, ms = fs.split("-")
                m = stack.enter_context(
                    fixtures.mount(
                        kind, b.work / f"mnt-{fs}", f"flush={ms}" if kind == "slowfs" else ms
                    )
                )
            where = m.backing_of if m else lambda p: p
            for task in [t for t in tasks if fs == "local" or t != "kernel"]:
                want = {
                    "wheel": lambda: trees.zip_manifest(wheel),
                    "kernel": lambda: trees.tar_manifest(corpora.linux() / "linux.tar"),
                }
                check = (
                    trees.check_tree(want[task](), where)
                    if task in want
                    else trees.check_count(UFO_FILES, where=where)
                )
                tools = {
                    w: (lambda s, w=w, t=task: [py, __file__, w, inputs[t], s.out])
                    for w in WAYS[task]
                }
                only = b.args.tools.split(",") if b.args.tools else list(tools)
                tools = {k: v for k, v in tools.items() if k in only}
                rows = b.batch(
                    f"python-{fs}-{task}",
                    tools,
                    check,
                    out_root=m.path if m else None,
                    sync=not m,
                )
                text += ["", f"### {task} on {fs}", "", report.table(rows, base=list(tools)[0])]
    b.save("\n".join(text))


if __name__ == "__main__":
    way(*sys.argv[1:4])
