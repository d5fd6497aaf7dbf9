"""The ways a Python program writes files, for benches/python-peers.sh: one process per timed run.

    py-ways.py WAY ARCHIVE OUT        WAY: fastwrite, zipfile, tarfile, shutil
    py-ways.py WAY N OUT              WAY: batch, loop, threads32, batch-open

Extraction:
  fastwrite  fastwrite.extract(ARCHIVE, OUT) (defaults: writers and close pool sized by the run)
  zipfile    zipfile.ZipFile(ARCHIVE).extractall(OUT)
  tarfile    tarfile.open(ARCHIVE).extractall(OUT, filter="data") (the safe filter, Python
             3.12's recommendation and 3.14's default)
  shutil     shutil.unpack_archive(ARCHIVE, OUT) (with filter="data" for a tar)

A program's own files: N small files shaped as a UFO font's glyphs (1-8 KiB of XML each, in
glyphs/, plus metainfo.plist), their content made before the clock matters (same bytes for every
way), written from one Python thread:
  loop       for each: with open(path, "wb") as f: f.write(data)
  threads32  the same function run by concurrent.futures.ThreadPoolExecutor(32)
  batch      with fastwrite.Batch(OUT) as batch: batch.write(path, data) for each
  batch-open the same through batch.open(path) (a file object, as a serializer writes)

Exits non-zero if anything failed (every way raises on a failure).
"""

from __future__ import annotations

import os
import sys


def glyphs(n: int) -> list[tuple[str, bytes]]:
    """N files of a UFO's shape: glyphs/NAME.glif of 1-8 KiB, deterministic. Made in a few
    milliseconds (180 outlines, each glyph its own header around one), so that the time
    measured is the writing's."""
    outlines = [
        "".join(
            f'    <point x="{(k * 7 + p * 13) % 1000}" y="{(k * 11 + p * 17) % 1000}" type="line"/>\n'
            for p in range(20 + k)
        )
        for k in range(180)
    ]
    files = [("metainfo.plist", b"<?xml version='1.0'?><plist><dict/></plist>\n")]
    for i in range(n - 1):
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<glyph name="g{i}" format="2">\n'
            f'  <advance width="{500 + i % 300}"/>\n  <outline>\n   <contour>\n'
            f"{outlines[(i * 37) % 180]}   </contour>\n  </outline>\n</glyph>\n"
        )
        files.append((f"glyphs/g{i:05d}.glif", xml.encode()))
    return files


def main() -> None:
    way, what, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if way == "fastwrite":
        import fastwrite

        fastwrite.extract(what, out)
    elif way == "zipfile":
        import zipfile

        with zipfile.ZipFile(what) as z:
            z.extractall(out)
    elif way == "tarfile":
        import tarfile

        with tarfile.open(what) as t:
            t.extractall(out, filter="data")
    elif way == "shutil":
        import shutil

        if what.endswith((".zip", ".whl")):
            shutil.unpack_archive(what, out, format="zip")  # it knows no .whl by name
        else:
            shutil.unpack_archive(what, out, filter="data")
    else:
        files = glyphs(int(what))
        if way == "loop":
            os.makedirs(os.path.join(out, "glyphs"), exist_ok=True)
            for name, data in files:
                with open(os.path.join(out, name), "wb") as f:
                    f.write(data)
        elif way == "threads32":
            from concurrent.futures import ThreadPoolExecutor

            os.makedirs(os.path.join(out, "glyphs"), exist_ok=True)

            def write(item: tuple[str, bytes]) -> None:
                with open(os.path.join(out, item[0]), "wb") as f:
                    f.write(item[1])

            with ThreadPoolExecutor(32) as pool:
                for _ in pool.map(write, files):  # re-raises any failure
                    pass
        elif way == "batch":
            import fastwrite

            with fastwrite.Batch(out) as batch:
                for name, data in files:
                    batch.write(name, data)
        elif way == "batch-open":
            import fastwrite

            with fastwrite.Batch(out) as batch:
                for name, data in files:
                    with batch.open(name) as f:
                        f.write(data)
        else:
            sys.exit(f"py-ways: unknown way {way}")


if __name__ == "__main__":
    main()
