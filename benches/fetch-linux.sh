#!/usr/bin/env bash
# Usage: benches/fetch-linux.sh
#
# Fetches the "large tree" corpus: Debian's linux-source-6.1 package (~78,000 files, 1.3 GB
# unpacked) from the Debian archive, into a cache dir outside the repo, and makes the same tar
# in every format the benchmarks compare: .tar, .tar.gz (pigz: a standard gzip file), .tar.zst
# and .tar.xz (as Debian ships it). Prints the cache dir holding linux.tar{,.gz,.zst,.xz}.
# Idempotent: what exists is not made again.
#
# Env: FASTWRITE_BENCH_CACHE (default ~/.cache/fastwrite-bench)
set -euo pipefail

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
DIR="$CACHE/linux"
mkdir -p "$DIR"
cd "$DIR"

need=()
command -v pigz >/dev/null || need+=(pigz)
command -v zstd >/dev/null || need+=(zstd)
command -v xz >/dev/null || need+=(xz-utils)
if ((${#need[@]})); then
    echo "fetch-linux: installing ${need[*]}" >&2
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ ! -s linux.tar.xz ]]; then
    if ! ls linux-source-6.1_*.deb >/dev/null 2>&1; then
        echo "fetch-linux: downloading linux-source-6.1 (~140 MB) into $DIR" >&2
        apt-get download linux-source-6.1 >&2
    fi
    deb="$(ls linux-source-6.1_*.deb | tail -n 1)"
    dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/src/linux-source-6.1.tar.xz > linux.tar.xz.part
    mv linux.tar.xz.part linux.tar.xz
fi
[[ -s linux.tar ]] || { xz -dc -T2 linux.tar.xz > linux.tar.part && mv linux.tar.part linux.tar; }
[[ -s linux.tar.gz ]] || { pigz -p2 -6 -c linux.tar > linux.tar.gz.part && mv linux.tar.gz.part linux.tar.gz; }
[[ -s linux.tar.zst ]] || { zstd -q -3 -T2 linux.tar -o linux.tar.zst.part && mv linux.tar.zst.part linux.tar.zst; }

echo "fetch-linux: $(tar -tf linux.tar | wc -l) entries in $DIR/linux.tar{,.gz,.zst,.xz}" >&2
echo "$DIR"
