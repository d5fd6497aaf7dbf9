#!/usr/bin/env bash
# Usage: benches/fetch-corpus.sh
#
# Downloads the zip benchmark corpus (a pinned botocore wheel: ~2000 small
# files, the typical "many small files" case) into a cache directory outside
# the repo, and prints the wheel's path on stdout.  Idempotent: if the wheel is
# already cached nothing is downloaded.
#
# Env:
#   FASTWRITE_BENCH_CACHE  cache dir (default: $HOME/.cache/fastwrite-bench)
#   BOTOCORE_VERSION       wheel version to use (default: pinned below)
set -euo pipefail

# Pinned so that results are comparable across runs and machines.
BOTOCORE_VERSION="${BOTOCORE_VERSION:-1.44.5}"
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
WHEEL="$CACHE/botocore-${BOTOCORE_VERSION}-py3-none-any.whl"

mkdir -p "$CACHE"

if [[ ! -s "$WHEEL" ]]; then
    # Status goes to stderr so that stdout is only the path (callers capture it).
    echo "fetch-corpus: downloading botocore==$BOTOCORE_VERSION into $CACHE" >&2
    pip download --quiet --no-deps --no-cache-dir --only-binary=:all: \
        "botocore==$BOTOCORE_VERSION" -d "$CACHE" >&2
fi

# Sanity check: the wheel must be a readable zip with a plausible entry count.
count=$(unzip -Z1 "$WHEEL" | wc -l)
if (( count < 1000 )); then
    echo "fetch-corpus: $WHEEL has only $count entries; expected ~2000" >&2
    exit 1
fi
echo "fetch-corpus: $WHEEL ($count entries)" >&2
echo "$WHEEL"
