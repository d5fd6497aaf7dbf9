#!/usr/bin/env bash
# Usage: benches/fetch-corpus.sh [botocore|scipy|torch|kernel]
#
# Downloads (or makes) a zip benchmark corpus in a cache directory outside the repo, and prints
# its path on stdout. Idempotent: if the zip is already cached nothing is downloaded or made.
#   botocore (default): a pinned botocore wheel, ~2,000 small files, the typical "many small
#     files" case.
#   scipy: the scipy 1.17.1 wheel for Linux x86_64 (1,425 files, 114 MB out; a few shared libraries of
#     tens of MB among them): a mid-sized wheel where a handful of entries are most of the bytes.
#   torch: the torch 2.5.1 wheel for Linux x86_64 (906 MB; 11,269 files, 1.75 GB out, one
#     entry of 900 MB): the case where one member bounds the run.
#   kernel: the Linux kernel tree (fetch-trees.sh kernel) zipped by Info-ZIP zip 3.0 (level 6),
#     made once: 78,579 files and 5,096 dirs, many small files in a deep tree. Without the
#     tree's 56 symlinks: ripunzip (the best zip peer) writes a symlink as a regular file
#     holding the target's path, so its output could not be checked against the others'.
#
# Env:
#   FASTWRITE_BENCH_CACHE  cache dir (default: $HOME/.cache/fastwrite-bench)
#   BOTOCORE_VERSION       wheel version to use (default: pinned below)
set -euo pipefail

# Pinned so that results are comparable across runs and machines.
BOTOCORE_VERSION="${BOTOCORE_VERSION:-1.44.5}"
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
case "${1:-botocore}" in
    botocore)
        WHEEL="$CACHE/botocore-${BOTOCORE_VERSION}-py3-none-any.whl"
        pip_args=("botocore==$BOTOCORE_VERSION")
        min_entries=1000
        ;;
    scipy)
        WHEEL="$CACHE/scipy-1.17.1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
        pip_args=(--python-version 3.12 --platform manylinux_2_28_x86_64 "scipy==1.17.1")
        min_entries=1400
        ;;
    torch)
        WHEEL="$CACHE/torch-2.5.1-cp312-cp312-manylinux1_x86_64.whl"
        pip_args=(--python-version 3.12 --platform manylinux1_x86_64 "torch==2.5.1")
        min_entries=11000
        ;;
    kernel)
        TREE="$("$(dirname "${BASH_SOURCE[0]}")/fetch-trees.sh" kernel)"
        WHEEL="$(dirname "$TREE")/linux.zip"
        min_entries=78000
        if [[ ! -s "$WHEEL" ]]; then
            command -v zip >/dev/null || apt-get install -y -qq zip >/dev/null
            echo "fetch-corpus: zipping $TREE into $WHEEL (Info-ZIP zip, once; about 30 s)" >&2
            rm -f -- "$WHEEL.part.zip"
            # Every directory and file, no symlink (see above); zip appends .zip to a name
            # without it; the subshell keeps the caller's cwd.
            (cd "$TREE" && find . -mindepth 1 ! -type l | LC_ALL=C sort | zip -q -@ "$WHEEL.part.zip")
            mv -- "$WHEEL.part.zip" "$WHEEL"
        fi
        ;;
    *) echo "fetch-corpus: unknown corpus '$1' (botocore, scipy, torch or kernel)" >&2; exit 2 ;;
esac

mkdir -p "$CACHE"

if [[ ! -s "$WHEEL" ]]; then
    # Status goes to stderr so that stdout is only the path (callers capture it).
    echo "fetch-corpus: downloading ${pip_args[*]: -1} into $CACHE" >&2
    pip download --quiet --no-deps --no-cache-dir --only-binary=:all: \
        "${pip_args[@]}" -d "$CACHE" >&2
fi

# Sanity check: the wheel must be a readable zip with a plausible entry count.
count=$(unzip -Z1 "$WHEEL" | wc -l)
if (( count < min_entries )); then
    echo "fetch-corpus: $WHEEL has only $count entries; expected at least $min_entries" >&2
    exit 1
fi
echo "fetch-corpus: $WHEEL ($count entries)" >&2
echo "$WHEEL"
