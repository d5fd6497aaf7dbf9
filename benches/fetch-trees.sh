#!/usr/bin/env bash
# Usage: benches/fetch-trees.sh kernel|bigfiles
#
# Makes a source tree for the copy benchmarks (mirror-peers.sh, syscalls.sh mirror) in the
# cache dir outside the repo, and prints its path:
#   kernel    the Linux kernel tree (linux.tar from fetch-linux.sh, extracted once with GNU tar,
#             top-level dir stripped): 78,579 files, 5,096 dirs, 56 symlinks, 1.3 GB.
#   bigfiles  "few large files": 8 files of 128 MiB of incompressible pseudo-random bytes
#             (seeded, so every machine gets the same bytes) in 3 dirs, fixed mtimes.
# Idempotent: a tree is made once, then marked done (NAME.done beside it, never inside it,
# or every copy would carry the marker). A half-made tree from an interrupted run is removed
# first, and that removal stamps the marker that makes the next bench wait (lib/common.sh).
#
# Env: FASTWRITE_BENCH_CACHE (default ~/.cache/fastwrite-bench)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
what="${1:?usage: fetch-trees.sh kernel|bigfiles}"

case "$what" in
kernel)
    DIR="$("$here/fetch-linux.sh")"
    TREE="$DIR/tree"
    if [[ ! -e "$DIR/tree.done" ]]; then
        [[ -e "$TREE" ]] && cleanup_workdir "$TREE"
        [[ -e "$TREE.part" ]] && cleanup_workdir "$TREE.part"
        echo "fetch-trees: extracting $DIR/linux.tar into $TREE (GNU tar, once)" >&2
        mkdir "$TREE.part"
        tar -xf "$DIR/linux.tar" -C "$TREE.part" --strip-components=1
        mv "$TREE.part" "$TREE"
        sync  # written back now, not during the first timed run that reads it
        touch "$DIR/tree.done"
    fi
    ;;
bigfiles)
    DIR="$CACHE/bigfiles"
    TREE="$DIR/tree"
    mkdir -p "$DIR"
    if [[ ! -e "$DIR/tree.done" ]]; then
        [[ -e "$TREE" ]] && cleanup_workdir "$TREE"
        [[ -e "$TREE.part" ]] && cleanup_workdir "$TREE.part"
        echo "fetch-trees: writing 8 x 128 MiB of seeded random bytes into $TREE (once)" >&2
        python3 - "$TREE.part" <<'PY'
import os, random, sys
root = sys.argv[1]
files = ["data/part-1.bin", "data/part-2.bin", "data/part-3.bin", "data/part-4.bin",
         "data/more/part-5.bin", "data/more/part-6.bin", "other/part-7.bin", "other/part-8.bin"]
MIB = 1 << 20
t0 = 1700000000  # fixed mtimes, one second apart: the tree is the same everywhere
for i, rel in enumerate(files):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = random.Random(f"fastwrite-bench-{i}")
    with open(path, "wb") as f:
        for _ in range(128):
            f.write(rng.randbytes(MIB))
    os.utime(path, (t0 + i, t0 + i))
for i, d in enumerate(["data/more", "data", "other", "."]):  # children before parents
    os.utime(os.path.join(root, d), (t0 + 100 + i, t0 + 100 + i))
PY
        mv "$TREE.part" "$TREE"
        sync
        touch "$DIR/tree.done"
    fi
    ;;
*)
    echo "fetch-trees: unknown tree '$what' (kernel or bigfiles)" >&2
    exit 2
    ;;
esac

echo "fetch-trees: $what: $(find "$TREE" -type f | wc -l) files, $(du -sh "$TREE" | cut -f1) in $TREE" >&2
echo "$TREE"
