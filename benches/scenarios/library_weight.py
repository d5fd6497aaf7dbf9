"""What a program that only writes files pays to depend on fastwrite: the crates it builds.

    benches/bench.py library-weight [--check] [--max-crates 30]

A throwaway crate depends on fastwrite (default-features = false) and rayon, runs examples/ufo.rs (a UFO save of
2,300 glyphs), built clean in release with this repository's Cargo.lock: its crates, the build's time, the files the
save wrote. --check (CI): fail over --max-crates crates or on a file missing; the time is printed, never asserted.
"""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from harness.fixtures import REPO

TIMED = False
EXPECTED = 6 + 2300 + 230  # property lists, the glyphs, a background layer for every tenth


def arguments(p):
    p.add_argument("--check", action="store_true")
    p.add_argument("--max-crates", type=int, default=30)


def main(args):
    with tempfile.TemporaryDirectory() as work:
        crate = Path(work) / "ufo"
        (crate / "src").mkdir(parents=True)
        (crate / "Cargo.toml").write_text(
            '[package]\nname = "ufo-save"\nversion = "0.1.0"\nedition = "2024"\npublish = false\n\n'
            f'[dependencies]\nfastwrite = {{ path = "{REPO}", default-features = false }}\n'
            'rayon = "1"\n\n[workspace]\n'
        )
        shutil.copy(REPO / "examples/ufo.rs", crate / "src/main.rs")
        shutil.copy(REPO / "Cargo.lock", crate / "Cargo.lock")  # the versions tested here

        def cargo(*args):
            for offline in (["--offline"], []):  # offline first: no registry where it needs none
                done = subprocess.run(["cargo", *args, *offline], cwd=crate, capture_output=True, text=True)
                if done.returncode == 0:
                    return done.stdout
            raise SystemExit(f"library-weight: cargo {' '.join(args)} failed:\n{done.stderr[-2000:]}")

        tree = cargo("tree", "-e", "normal", "--prefix", "none")
        crates = sorted({line.removesuffix(" (*)") for line in tree.splitlines() if line} - {""})
        crates = [c for c in crates if not c.startswith("ufo-save ")]
        print(f"crates built for the program (its own not counted): {len(crates)}")
        print("\n".join(f"  {c}" for c in crates))
        start = time.monotonic()
        cargo("build", "--release", "--quiet")
        print(f"clean release build: {time.monotonic() - start:.1f} s")
        stats = subprocess.run(
            [crate / "target/release/ufo-save", Path(work) / "out.ufo"], capture_output=True, text=True
        )
        files = sum(len(names) for _, _, names in os.walk(Path(work) / "out.ufo"))
        print(f"UFO save: {files} files written (expected {EXPECTED}), exit {stats.returncode}")
        print("\n".join(f"  {line}" for line in stats.stdout.splitlines() if line.startswith(("files", "failed"))))
    problems = [f"{len(crates)} crates, more than {args.max_crates}"] if len(crates) > args.max_crates else []
    problems += [f"the UFO save wrote {files} files, not {EXPECTED}"] if files != EXPECTED or stats.returncode else []
    for p in problems:
        print(f"library-weight: {p}")
    return 1 if args.check and problems else 0
