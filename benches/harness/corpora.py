"""The corpora the benches run on, fetched from the package registries or generated from seeds,
made once into the cache (never the repository), pinned so that every machine and every run gets
the same bytes: wheels (PyPI), an npm package (npm), Debian's kernel source (apt) as a tree, a
zip and tars, and generated trees. Each is made under a temporary name, then renamed: a half-made
corpus is never used.
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
NPM = os.environ.get("NPM_PACKAGE", "@mui/icons-material@9.5.0")
PACKERS = {  # each format from the .tar, and the .tar from it
    "tar.gz": ("pigz -p2 -6 -c", "gzip -dc"),
    "tar.zst": ("zstd -q -3 -T2 -c", "zstd -dc"),
    "tar.xz": ("xz -6 -T2 -c", "xz -dc -T2"),
}
T0 = 1700000000  # the fixed mtime of generated entries


def once(path, make):
    """PATH, made by MAKE(PART) into PATH.part and renamed, unless it is there already."""
    path = Path(path)
    if not path.exists():
        part = Path(f"{path}.part")
        delete(part)  # an interrupted run's (its delete stamps the settle marker)
        path.parent.mkdir(parents=True, exist_ok=True)
        make(part)
        os.sync()
        os.replace(part, path)
    return path


def piped(command, **kw):
    """A maker whose PART is what COMMAND writes on its standard output."""
    return lambda part: run(["bash", "-c", f"set -o pipefail; {{ {command}; }} > {part}"], timeout=3600, **kw)


def untarred(tar, strip=0):
    def make(part):
        part.mkdir()
        run(["tar", "-xf", tar, "-C", part, f"--strip-components={strip}"], timeout=3600)

    return make


def wheel(name="botocore"):
    """A pinned wheel from PyPI, or `kernel`: the kernel tree zipped by Info-ZIP zip (level 6)
    without its 56 symlinks (ripunzip writes a symlink as a file: it could not be checked)."""
    if name == "kernel":
        need("zip", "apt-get install -y zip")
        # Into a file (to stdout, zip writes data descriptors); it adds .zip to a name without.
        listing = "find . -mindepth 1 ! -type l | LC_ALL=C sort | zip -q -@ {0}.zip && mv {0}.zip {0}"
        return once(CACHE / "linux" / "linux.zip", lambda p: run(["bash", "-c", listing.format(p)], cwd=tree("kernel")))
    args, least = WHEELS[name]
    folder = CACHE / "wheels" / name
    if not list(folder.glob("*.whl")):
        say(f"downloading {args[-1]} from PyPI into {folder}")
        pip = "pip download -q --no-deps --no-cache-dir --only-binary=:all: -d".split()
        run([*pip, folder, *args], timeout=3600)
    found = sorted(folder.glob("*.whl"))[-1]
    with zipfile.ZipFile(found) as z:
        if len(z.namelist()) < least:
            raise SystemExit(f"bench: {found} has {len(z.namelist())} entries, not {least}+")
    return found


def unzipped(zip_path):
    """ZIP extracted once by unzip: a source tree for copies and uploads."""
    make = lambda part: run(["unzip", "-q", zip_path, "-d", part])  # noqa: E731
    return once(CACHE / "trees" / Path(zip_path).stem, make)


def packed(folder, stem):
    """FOLDER/STEM.tar and its .tar.gz, .tar.zst, .tar.xz, each made from one that is there."""
    for fmt, (_, unpack) in PACKERS.items():
        if (folder / f"{stem}.{fmt}").exists():
            once(folder / f"{stem}.tar", piped(f"{unpack} {folder}/{stem}.{fmt}"))
    for fmt, (pack, _) in PACKERS.items():
        once(folder / f"{stem}.{fmt}", piped(f"{pack} {folder}/{stem}.tar"))
    return folder


def linux():
    """Debian's linux-source-6.1 (78,579 files, 1.3 GB): linux.tar.xz as Debian ships it (55 xz
    blocks), .tar, .tar.gz (pigz), .tar.zst, in the folder returned."""
    folder = CACHE / "linux"
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "linux.tar.xz").exists() and not list(folder.glob("linux-source-6.1_*.deb")):
        say(f"downloading linux-source-6.1 (~140 MB) into {folder}")
        run(["apt-get", "download", "linux-source-6.1"], cwd=folder, timeout=3600)
    deb = f"{folder}/linux-source-6.1_*.deb"
    once(folder / "linux.tar.xz", piped(f"dpkg-deb --fsys-tarfile {deb} | tar -xO ./usr/src/linux-source-6.1.tar.xz"))
    return packed(folder, "linux")


def npm(package=NPM):
    """A pinned npm tarball (43,010 files of a few hundred bytes and no folder entries: every
    parent is the extractor's to make), by `npm pack` (which checks the registry's hash), as
    npm.tar.gz and re-packed as npm.tar, .tar.zst and .tar.xz, in the folder returned."""
    folder = CACHE / "npm" / package.lstrip("@").replace("/", "-").replace("@", "_")
    need("npm", "apt-get install -y npm")
    pack = f"cd {folder} && npm pack --silent --pack-destination . {package} >&2 && cat *.tgz"
    pack += " && rm *.tgz"
    folder.mkdir(parents=True, exist_ok=True)
    once(folder / "npm.tar.gz", piped(pack))
    return packed(folder, "npm")


def small_tars():
    """The small generated tree as small.tar, .tar.gz, .tar.zst, .tar.xz: smoke runs' tars."""
    folder = CACHE / "small-tars"
    folder.mkdir(parents=True, exist_ok=True)
    once(folder / "small.tar", lambda p: shutil.copy(generated("small") / "corpus.tar", p))
    return packed(folder, "small")


def tree(kind):
    """A source tree for copies: `kernel` (linux.tar by GNU tar, its top folder stripped:
    78,579 files, 5,096 folders, 56 symlinks) or `bigfiles` (8 files of 128 MiB of seeded random
    bytes in 3 folders, fixed mtimes)."""
    if kind == "kernel":
        return once(CACHE / "linux" / "tree", untarred(linux() / "linux.tar", strip=1))

    def random_files(part):
        names = [f"data/part-{i}.bin" for i in (1, 2, 3, 4)] + ["data/more/part-5.bin"]
        for i, rel in enumerate(names + ["data/more/part-6.bin", "other/part-7.bin", "other/part-8.bin"]):
            (part / rel).parent.mkdir(parents=True, exist_ok=True)
            rng = random.Random(f"fastwrite-bench-{i}")
            with open(part / rel, "wb") as f:
                for _ in range(128):
                    f.write(rng.randbytes(1 << 20))
            os.utime(part / rel, (T0 + i, T0 + i))
        for i, d in enumerate(["data/more", "data", "other", "."]):  # children before parents
            os.utime(part / d, (T0 + 100 + i, T0 + 100 + i))

    return once(CACHE / "bigfiles" / "tree", random_files)


def generated(kind):
    """close-lab's corpora (seeded contents, fixed mtimes, owners and order): `small`, 2,000
    files of 1-8 KiB in 50 folders; `big`, 8 files of 32 MiB. The folder holds tree/,
    corpus.zip, corpus.tar (folder entries in both) and the manifest ("FILES BYTES"). Contents
    are hex of random bytes: deflate halves them, so the decoder has real work."""
    rng = random.Random("fastwrite-close-lab-small-sizes")
    files = [
        (f"d{t}/s{s}/f{f:03}.txt", rng.randint(1024, 8192)) for t in range(5) for s in range(10) for f in range(40)
    ]
    files = files if kind == "small" else [(f"part{i % 2}/big-{i}.bin", 32 << 20) for i in range(8)]
    dirs = sorted({str(Path(rel).parents[k]) for rel, _ in files for k in range(2)} - {"."})

    def content(size, seed):
        return random.Random(f"fastwrite-close-lab-{seed}").randbytes((size + 1) // 2).hex().encode()[:size]

    def fixed(ti):
        ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, "root", "root"
        ti.mtime, ti.mode = T0, 0o755 if ti.isdir() else 0o644
        return ti

    def make(part):
        for n, (rel, size) in enumerate(files):
            (part / "tree" / rel).parent.mkdir(parents=True, exist_ok=True)
            with open(part / "tree" / rel, "wb") as f:
                for c in range(size >> 20) if size > 4 << 20 else [None]:  # big: in 1 MiB pieces
                    f.write(content(1 << 20, f"{n}-{c}") if c is not None else content(size, n))
        for p in [rel for rel, _ in files] + dirs[::-1]:
            os.utime(part / "tree" / p, (T0, T0))
        level = 1 if kind == "big" else 6  # big: 256 MiB to compress once; keep it quick
        with zipfile.ZipFile(part / "corpus.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=level) as z:
            for rel in sorted(dirs + [rel for rel, _ in files]):
                info = zipfile.ZipInfo(rel + "/" * (rel in dirs), (2023, 11, 14, 22, 13, 20))
                if rel in dirs:
                    info.external_attr = (0o40755 << 16) | 0x10
                    z.writestr(info, b"")
                    continue
                info.external_attr, info.compress_type = 0o100644 << 16, zipfile.ZIP_DEFLATED
                with open(part / "tree" / rel, "rb") as src, z.open(info, "w") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        with tarfile.open(part / "corpus.tar", "w", format=tarfile.PAX_FORMAT) as t:
            for rel in sorted(dirs + [rel for rel, _ in files]):
                t.add(part / "tree" / rel, arcname=rel, recursive=False, filter=fixed)
        got, _ = manifest(part / "tree")
        (part / "manifest").write_text(f"{len(got)} {sum(got.values())}\n")

    return once(CACHE / "close-lab" / kind, make)


def skeleton():
    """The kernel tree with every file empty (same names, modes, mtimes) as skeleton.tar and
    extracted once as skeleton/: file creation alone."""
    folder = linux()

    def emptied(part):
        with tarfile.open(folder / "linux.tar") as src, tarfile.open(part, "w", format=tarfile.PAX_FORMAT) as out:
            for m in src:
                m.size = 0 if m.isfile() else m.size
                out.addfile(m)

    tar = once(folder / "skeleton.tar", emptied)
    return tar, once(folder / "skeleton", untarred(tar, strip=1))


def entry_as_gz(zip_path, name, out):
    """One deflated entry's stream wrapped as a .gz (its CRC and size in the trailer), for the
    decoders that read only .gz files: the very stream fastwrite inflates."""

    def wrap(part):
        with zipfile.ZipFile(zip_path) as z:
            info = z.getinfo(name)
        with open(zip_path, "rb") as f, open(part, "wb") as gz:
            f.seek(info.header_offset + 26)
            f.seek(info.header_offset + 30 + sum(struct.unpack("<HH", f.read(4))))
            gz.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")  # deflate, no name, no mtime
            left = info.compress_size
            while left:
                left -= gz.write(f.read(min(left, 1 << 24)))
            gz.write(struct.pack("<II", info.CRC, info.file_size & 0xFFFFFFFF))

    return once(out, wrap)
