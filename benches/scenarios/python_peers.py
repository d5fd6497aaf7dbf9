"""The Python package against what a Python program does without it, one process per run.

    benches/bench.py python-peers [--python PY] [--tasks wheel,ufo] [--kernel] [FS ...]

wheel: the botocore wheel by fastwrite.extract, zipfile, shutil.unpack_archive; ufo: 3,366 small
files of a UFO font's shape from one thread by Batch.write, Batch.open, an open/write loop,
ThreadPoolExecutor(32); kernel (--kernel, local only): the kernel .tar.gz by fastwrite, tarfile,
shutil (filter="data"). FS (default local slowfs-1 slowfs-5 netfs-1): this disk, lab/slowfs with
N ms in every FLUSH, sshfs at N ms each way. The package is built from ./python into a venv in
the cache, unless --python has it. This file is the ways too (`PY python_peers.py WAY WHAT OUT`,
no harness imported: each way's own cost). --smoke: local, one round.
"""

import os
import sys

WAYS = {"wheel": "fastwrite zipfile shutil", "ufo": "batch batch-open loop threads32"}
WAYS = {k: v.split() for k, v in WAYS.items()} | {"kernel": ["fastwrite", "tarfile", "shutil"]}
UFO_FILES = 3366


def glyphs(n):
    """N files of a UFO's shape (glyphs/NAME.glif, 1-8 KiB of XML), made before the way's work
    starts (180 outlines, each glyph its own header around one)."""
    point = '    <point x="{}" y="{}" type="line"/>\n'
    outlines = [
        "".join(point.format((k * 7 + p * 13) % 1000, (k * 11 + p * 17) % 1000) for p in range(20 + k))
        for k in range(180)
    ]
    files = [("metainfo.plist", b"<?xml version='1.0'?><plist><dict/></plist>\n")]
    for i in range(n - 1):
        head = f'<?xml version="1.0" encoding="UTF-8"?>\n<glyph name="g{i}" format="2">\n'
        body = f'  <advance width="{500 + i % 300}"/>\n  <outline>\n   <contour>\n{outlines[(i * 37) % 180]}'
        files.append((f"glyphs/g{i:05d}.glif", (head + body + "   </contour>\n  </outline>\n</glyph>\n").encode()))
    return files


def way(name, what, out):
    """One way, in this process; raises on any failure."""
    import shutil
    import tarfile
    import zipfile

    if name in ("fastwrite", "batch", "batch-open"):
        import fastwrite
    if name == "fastwrite":
        return fastwrite.extract(what, out)
    if name in ("zipfile", "tarfile"):
        with zipfile.ZipFile(what) if name == "zipfile" else tarfile.open(what) as archive:
            return archive.extractall(out, **({"filter": "data"} if name == "tarfile" else {}))
    if name == "shutil":  # (unpack_archive knows no .whl by name)
        kind = {"format": "zip"} if what.endswith((".zip", ".whl")) else {"filter": "data"}
        return shutil.unpack_archive(what, out, **kind)

    def write(item):
        with open(os.path.join(out, item[0]), "wb") as f:
            f.write(item[1])

    files = glyphs(int(what))
    if name in ("loop", "threads32"):
        os.makedirs(os.path.join(out, "glyphs"), exist_ok=True)
        if name == "loop":
            return [write(f) for f in files]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(32) as pool:
            return list(pool.map(write, files))  # (re-raises a failure)
    with fastwrite.Batch(out) as batch:
        for path, data in files:
            if name == "batch":
                batch.write(path, data)
                continue
            with batch.open(path) as f:
                f.write(data)


def arguments(p):
    p.add_argument("--python", help="an interpreter with the fastwrite package (default: build one)")
    p.add_argument("--tasks", default="wheel,ufo")
    p.add_argument("--kernel", action="store_true")
    p.add_argument("fs", nargs="*", default=["local", "slowfs-1", "slowfs-5", "netfs-1"])


def run(b):
    import contextlib

    from harness import corpora, fixtures, report, trees

    py, venv = b.args.python, fixtures.CACHE / "python-venv"
    if not py:
        if not (venv / "bin" / "python").exists():
            fixtures.run([sys.executable, "-m", "venv", venv])
        pip = [venv / "bin" / "pip", "install", "-q", "--force-reinstall", "--no-deps"]
        fixtures.run(pip + [fixtures.REPO / "python"], timeout=7200)
        py = venv / "bin" / "python"
    tasks = b.args.tasks.split(",") + (["kernel"] if b.args.kernel else [])
    wheel, linux = corpora.wheel(), corpora.linux() if "kernel" in tasks else None
    inputs = {"wheel": wheel, "ufo": UFO_FILES, "kernel": linux and linux / "linux.tar.gz"}
    only = b.args.tools.split(",") if b.args.tools else None
    text = [report.header(f"python-peers: {py}")]
    for fs in ["local"] if b.smoke else b.args.fs:
        with contextlib.ExitStack() as stack:
            m, where = None, lambda path: path
            if fs != "local":
                kind, ms = fs.split("-")
                arg = f"flush={ms}" if kind == "slowfs" else ms
                m = stack.enter_context(fixtures.mount(kind, b.work / f"mnt-{fs}", arg))
                where = m.backing_of
            for task in [t for t in tasks if fs == "local" or t != "kernel"]:
                if task == "ufo":
                    check = trees.check_count(UFO_FILES, where=where)
                else:
                    want = trees.zip_manifest(wheel) if task == "wheel" else trees.tar_manifest(linux / "linux.tar")
                    check = trees.check_tree(want, where)
                ways = [w for w in WAYS[task] if not only or w in only]
                tools = {w: (lambda s, w=w, t=task: [py, __file__, w, inputs[t], s.out]) for w in ways}
                rows = b.batch(f"python-{fs}-{task}", tools, check, out_root=m and m.path, sync=not m)
                text += ["", f"### {task} on {fs}", "", report.table(rows, base=ways[0])]
    b.save("\n".join(text))


if __name__ == "__main__":
    way(*sys.argv[1:4])
