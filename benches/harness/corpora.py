"""The corpora the benches run on, fetched from the package registries or generated from seeds,
made once into the cache (never the repository), pinned so that every machine and every run gets
the same bytes: real wheels (PyPI), an npm package (the npm registry), Debian's kernel source
(apt) as a tree, a zip and tars, and generated trees. A half-made corpus is never used: each is
made under a temporary name and renamed into place.
"""

import os
import random
import shutil
import struct
import tarfile
import zipfile
from pathlib import Path

from .fixtures import CACHE, delete, need, run, say
from .trees import manifest

BOTOCORE = os.environ.get("BOTOCORE_VERSION", "1.44.5")
WHEELS = {  # name: (pip's arguments, the least entries a good download has)
    "botocore": ([f"botocore=={BOTOCORE}"], 1000),
    "scipy": ("--python-version 3.12 --platform manylinux_2_28_x86_64 scipy==1.17.1".split(), 1400),
    "torch": ("--python-version 3.12 --platform manylinux1_x86_64 torch==2.5.1".split(), 11000),
}
T0 = 1700000000  # the fixed mtime of generated entries


def once(path, make):
    """PATH, made by MAKE(PART) into PATH.part and renamed, unless it is there already."""
    path = Path(path)
    if not path.exists():
        part = Path(f"{path}.part")
        delete(part)  # an interrupted run's: deleting it stamps the settle marker
        path.parent.mkdir(parents=True, exist_ok=True)
        make(part)
        os.sync()
        os.replace(part, path)
    return path


def wheel(name="botocore"):
    """A zip corpus: a pinned wheel from PyPI, or `kernel`, the kernel tree zipped by Info-ZIP
    zip (level 6) without its 56 symlinks (ripunzip writes a symlink as a file holding its
    target, so its output could not be checked against the others')."""
    if name == "kernel":
        source = tree("kernel")

        def zipped(part):
            need("zip", "apt-get install -y zip")
            # Every folder and file, no symlink; zip appends .zip to a name without it.
            listing = f"find . -mindepth 1 ! -type l | LC_ALL=C sort | zip -q -@ {part}.zip"
            run(["bash", "-c", listing], cwd=source, timeout=3600)
            os.replace(f"{part}.zip", part)

        return once(source.parent / "linux.zip", zipped)
    args, least = WHEELS[name]
    folder = CACHE / "wheels" / name
    found = sorted(folder.glob("*.whl")) if folder.exists() else []
    if not found:
        say(f"downloading {args[-1]} from PyPI into {folder}")
        pip = ["pip", "download", "-q", "--no-deps", "--no-cache-dir", "--only-binary=:all:"]
        run(pip + args + ["-d", folder], timeout=3600)
        found = sorted(folder.glob("*.whl"))
    with zipfile.ZipFile(found[-1]) as z:
        if len(z.namelist()) < least:
            raise SystemExit(f"bench: {found[-1]} has {len(z.namelist())} entries, not {least}+")
    return found[-1]


def unzipped(zip_path):
    """ZIP extracted once by unzip (a source tree for copies and uploads: its files, unzip's
    modes and mtimes)."""
    return once(
        CACHE / "trees" / Path(zip_path).stem,
        lambda part: run(["unzip", "-q", zip_path, "-d", part]),
    )


def linux():
    """Debian's linux-source-6.1 (78,579 files, 1.3 GB) as linux.tar.xz (as Debian ships it:
    55 xz blocks), .tar, .tar.gz (pigz) and .tar.zst, in the folder returned."""
    folder = CACHE / "linux"
    folder.mkdir(parents=True, exist_ok=True)

    def xz(part):
        if not list(folder.glob("linux-source-6.1_*.deb")):
            say(f"downloading linux-source-6.1 (~140 MB) into {folder}")
            run(["apt-get", "download", "linux-source-6.1"], cwd=folder, timeout=3600)
        deb = sorted(folder.glob("linux-source-6.1_*.deb"))[-1]
        inner = "./usr/src/linux-source-6.1.tar.xz"
        run(
            ["bash", "-c", f"dpkg-deb --fsys-tarfile {deb} | tar -xO {inner} > {part}"],
            timeout=3600,
        )

    once(folder / "linux.tar.xz", xz)
    return packed(folder, "linux")


PACKERS = {  # how each format is made from the .tar, and the .tar from it
    "tar.gz": ("pigz -p2 -6 -c", "gzip -dc"),
    "tar.zst": ("zstd -q -3 -T2 -c", "zstd -dc"),
    "tar.xz": ("xz -6 -T2 -c", "xz -dc -T2"),
}


def packed(folder, stem):
    """FOLDER/STEM.tar and its .tar.gz, .tar.zst, .tar.xz, each made from one that is there."""

    def shell(command):
        return lambda part: run(["bash", "-c", f"{command} > {part}"], timeout=3600)

    for fmt, (_, unpack) in PACKERS.items():
        if (folder / f"{stem}.{fmt}").exists():
            once(folder / f"{stem}.tar", shell(f"{unpack} {folder}/{stem}.{fmt}"))
    for fmt, (pack, _) in PACKERS.items():
        once(folder / f"{stem}.{fmt}", shell(f"{pack} {folder}/{stem}.tar"))
    return folder


def small_tars():
    """The small generated tree (2,000 files) as small.tar, .tar.gz, .tar.zst and .tar.xz: the
    tar peers' input for a smoke run."""
    folder = CACHE / "small-tars"
    folder.mkdir(parents=True, exist_ok=True)
    once(folder / "small.tar", lambda p: shutil.copy(generated("small") / "corpus.tar", p))
    return packed(folder, "small")


NPM_PACKAGE = os.environ.get("NPM_PACKAGE", "@mui/icons-material@9.5.0")


def npm(package=NPM_PACKAGE):
    """A pinned npm package tarball (43,010 files of a few hundred bytes, no folder entries, so
    an extractor makes every parent itself), by `npm pack` (which checks the registry's hash), as
    npm.tar.gz and re-packed as npm.tar, .tar.zst and .tar.xz, in the folder returned."""
    folder = CACHE / "npm" / package.lstrip("@").replace("/", "-").replace("@", "_")
    folder.mkdir(parents=True, exist_ok=True)

    def pack(part):
        need("npm", "apt-get install -y npm")
        part.mkdir()
        run(["npm", "pack", "--silent", "--pack-destination", part, package], timeout=1800)
        os.replace(next(part.glob("*.tgz")), f"{part}.tgz")
        part.rmdir()
        os.replace(f"{part}.tgz", part)

    once(folder / "npm.tar.gz", pack)
    return packed(folder, "npm")


def tree(kind):
    """A source tree for copies: `kernel` (linux.tar extracted by GNU tar, its top folder
    stripped: 78,579 files, 5,096 folders, 56 symlinks) or `bigfiles` (8 files of 128 MiB of
    seeded random bytes in 3 folders, fixed mtimes)."""
    if kind == "kernel":
        src = linux() / "linux.tar"

        def untar(part):
            part.mkdir()
            run(["tar", "-xf", src, "-C", part, "--strip-components=1"], timeout=3600)

        return once(CACHE / "linux" / "tree", untar)

    def random_files(part):
        names = [f"data/part-{i}.bin" for i in (1, 2, 3, 4)] + [
            f"data/more/part-{i}.bin" for i in (5, 6)
        ]
        names += ["other/part-7.bin", "other/part-8.bin"]
        for i, rel in enumerate(names):
            path = part / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            rng = random.Random(f"fastwrite-bench-{i}")
            with open(path, "wb") as f:
                for _ in range(128):
                    f.write(rng.randbytes(1 << 20))
            os.utime(path, (T0 + i, T0 + i))
        for i, d in enumerate(["data/more", "data", "other", "."]):  # children before parents
            os.utime(part / d, (T0 + 100 + i, T0 + 100 + i))

    return once(CACHE / "bigfiles" / "tree", random_files)


def generated(kind):
    """close-lab's corpora, deterministic (seeded contents, fixed mtimes, owners and order):
    `small`, 2,000 files of 1-8 KiB in 50 folders; `big`, 8 files of 32 MiB in 2. The folder
    holds tree/, corpus.zip, corpus.tar (folder entries included in both) and the manifest.
    Contents are hex of random bytes: deflate halves them, so the decoder has real work."""
    rng = random.Random("fastwrite-close-lab-small-sizes")
    if kind == "small":
        layout = [(f"d{t}/s{s}/f{f:03}.txt", rng.randint(1024, 8192)) for t in range(5)
                  for s in range(10) for f in range(40)]  # fmt: skip
    else:
        layout = [(f"part{i % 2}/big-{i}.bin", 32 << 20) for i in range(8)]

    def make(part):
        tree_ = part / "tree"

        def content(size, seed):
            data = random.Random(f"fastwrite-close-lab-{seed}").randbytes((size + 1) // 2)
            return data.hex().encode()[:size]

        for n, (rel, size) in enumerate(layout):
            (tree_ / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(tree_ / rel, "wb") as f:
                if size > 4 << 20:  # in 1 MiB pieces, so memory stays small
                    for c in range(size >> 20):
                        f.write(content(1 << 20, f"{n}-{c}"))
                else:
                    f.write(content(size, n))
        dirs = sorted({str(Path(rel).parents[k]) for rel, _ in layout for k in range(2)} - {"."})
        for p in [tree_ / rel for rel, _ in layout] + [tree_ / d for d in dirs[::-1]]:
            os.utime(p, (T0, T0))
        entries = sorted(dirs + [rel for rel, _ in layout])
        level = 1 if kind == "big" else 6  # big: 256 MiB to compress once; keep it quick
        with zipfile.ZipFile(
            part / "corpus.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=level
        ) as z:
            for rel in entries:
                info = zipfile.ZipInfo(
                    rel + ("/" if rel in dirs else ""), (2023, 11, 14, 22, 13, 20)
                )
                info.external_attr = ((0o40755 << 16) | 0x10) if rel in dirs else 0o100644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                if rel in dirs:
                    z.writestr(info, b"")
                else:
                    with open(tree_ / rel, "rb") as src, z.open(info, "w") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)

        def fixed(ti):
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.mtime, ti.mode = T0, 0o755 if ti.isdir() else 0o644
            return ti

        with tarfile.open(part / "corpus.tar", "w", format=tarfile.PAX_FORMAT) as t:
            for rel in entries:
                t.add(tree_ / rel, arcname=rel, recursive=False, filter=fixed)
        files, _ = manifest(tree_)
        (part / "manifest").write_text(f"{len(files)} {sum(files.values())}\n")

    return once(CACHE / "close-lab" / kind, make)


def skeleton():
    """The kernel tree with every file empty (same names, modes, mtimes), as skeleton.tar and
    extracted once as skeleton/: file creation alone."""
    folder = linux()

    def emptied(part):
        with (
            tarfile.open(folder / "linux.tar") as src,
            tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as out,
        ):
            for m in src:
                m.size = 0 if m.isfile() else m.size
                out.addfile(m)

    tar = once(folder / "skeleton.tar", emptied)

    def untar(part):
        part.mkdir()
        run(["tar", "-xf", tar, "-C", part, "--strip-components=1"], timeout=3600)

    return tar, once(folder / "skeleton", untar)


def entry_as_gz(zip_path, name, out):
    """One deflated entry's raw stream wrapped as a .gz (its CRC and size in the trailer), for
    the gzip decoders that read only .gz files: the same stream fastwrite inflates."""

    def wrap(part):
        with zipfile.ZipFile(zip_path) as z:
            info = z.getinfo(name)
        with open(zip_path, "rb") as f, open(part, "wb") as gz:
            f.seek(info.header_offset + 26)
            name_len, extra_len = struct.unpack("<HH", f.read(4))
            f.seek(info.header_offset + 30 + name_len + extra_len)
            gz.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")  # deflate, no name, no mtime
            left = info.compress_size
            while left:
                left -= gz.write(f.read(min(left, 1 << 24)))
            gz.write(struct.pack("<II", info.CRC, info.file_size & 0xFFFFFFFF))

    return once(out, wrap)
