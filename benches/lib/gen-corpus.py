#!/usr/bin/env python3
"""Usage: gen-corpus.py small|big DIR

Makes a generated corpus for benches/close-lab.sh in DIR (which must not exist yet):

  DIR/tree/        the files themselves (the reference every extracted tree is diffed against)
  DIR/corpus.zip   the same tree as a zip (deflate, directory entries included)
  DIR/corpus.tar   the same tree as a ustar/pax tar (directory entries included)
  DIR/manifest     "FILES BYTES": the regular files and their total size

  small  2,000 files of 1-8 KiB in 50 directories (5 x 10), 40 files each
  big    8 files of 32 MiB in 2 directories

Deterministic: contents come from seeded generators, and every mtime, owner and order is fixed,
so the same bytes come out on every machine and every run. Contents are hex text of random
bytes (deflate halves it: the decoder has real work, unlike stored or all-zero data).
"""

import os
import random
import sys
import tarfile
import zipfile

T0 = 1700000000  # fixed mtime for every entry
KIB, MIB = 1 << 10, 1 << 20


def layout(kind):
    """Yields (relative path, size, seed)."""
    if kind == "small":
        rng = random.Random("fastwrite-close-lab-small-sizes")
        n = 0
        for top in range(5):
            for sub in range(10):
                for f in range(40):
                    yield f"d{top}/s{sub}/f{f:03}.txt", rng.randint(1 * KIB, 8 * KIB), n
                    n += 1
    elif kind == "big":
        for i in range(8):
            yield f"part{i % 2}/big-{i}.bin", 32 * MIB, i
    else:
        sys.exit(f"gen-corpus: unknown corpus {kind!r} (small or big)")


def content(size, seed):
    rng = random.Random(f"fastwrite-close-lab-{seed}")
    return rng.randbytes((size + 1) // 2).hex().encode()[:size]


def main():
    kind, out = sys.argv[1], sys.argv[2]
    tree = os.path.join(out, "tree")
    os.makedirs(tree)  # fails if DIR/tree exists: the caller makes corpora in a fresh .part dir
    files = list(layout(kind))
    dirs = set()
    total = 0
    for rel, size, seed in files:
        path = os.path.join(tree, rel)
        d = os.path.dirname(rel)
        while d and d not in dirs:
            dirs.add(d)
            d = os.path.dirname(d)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            if size > 4 * MIB:  # big files: in 1 MiB chunks, so memory stays small
                for c in range(size // MIB):
                    f.write(content(MIB, f"{seed}-{c}"))
            else:
                f.write(content(size, seed))
        os.utime(path, (T0, T0))
        total += size
    for d in sorted(dirs, key=lambda d: -d.count("/")):
        os.utime(os.path.join(tree, d), (T0, T0))

    entries = sorted(dirs) + [rel for rel, _, _ in files]
    entries.sort()

    level = 1 if kind == "big" else 6  # big: 256 MiB to compress, once; keep it quick
    with zipfile.ZipFile(
        os.path.join(out, "corpus.zip"), "w", zipfile.ZIP_DEFLATED, compresslevel=level
    ) as z:
        for rel in entries:
            path = os.path.join(tree, rel)
            if rel in dirs:
                info = zipfile.ZipInfo(rel + "/", date_time=(2023, 11, 14, 22, 13, 20))
                info.external_attr = (0o40755 << 16) | 0x10
                z.writestr(info, b"")
            else:
                info = zipfile.ZipInfo(rel, date_time=(2023, 11, 14, 22, 13, 20))
                info.external_attr = 0o100644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as src, z.open(info, "w", force_zip64=False) as dst:
                    while chunk := src.read(MIB):
                        dst.write(chunk)

    def fixed(ti):
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        ti.mtime = T0
        ti.mode = 0o755 if ti.isdir() else 0o644
        return ti

    with tarfile.open(os.path.join(out, "corpus.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        for rel in entries:
            t.add(os.path.join(tree, rel), arcname=rel, recursive=False, filter=fixed)

    with open(os.path.join(out, "manifest"), "w") as f:
        f.write(f"{len(files)} {total}\n")
    print(
        f"gen-corpus: {kind}: {len(files)} files, {len(dirs)} dirs, {total} bytes in {out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
