#!/usr/bin/env bash
# Usage: benches/fetch-npm.sh
#
# Fetches the npm corpus: a pinned npm package tarball (default @mui/icons-material 9.5.0:
# ~43,000 files with a median of ~200 bytes, all under package/, and like most npm tarballs NO
# directory entries, so an extractor must make every parent itself) into a cache dir outside
# the repo, with `npm pack` (which checks the registry's integrity hash). Makes the same tar in
# the formats tar-peers.sh compares: npm.tar.gz (the registry's .tgz as is), npm.tar,
# npm.tar.zst and npm.tar.xz. Prints the dir holding npm.tar{,.gz,.zst,.xz}. Idempotent.
#
#   TAR_CORPUS=npm benches/tar-peers.sh tar.gz     times the peers on it
#
# Env: FASTWRITE_BENCH_CACHE (default ~/.cache/fastwrite-bench),
#      NPM_PACKAGE (default @mui/icons-material@9.5.0: pinned so results stay comparable).
set -euo pipefail

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
PKG="${NPM_PACKAGE:-@mui/icons-material@9.5.0}"
slug="$(tr '@/' '_-' <<<"${PKG#@}")"  # @mui/icons-material@9.5.0 -> mui-icons-material_9.5.0
DIR="$CACHE/npm/$slug"
mkdir -p "$DIR"
cd "$DIR"

command -v npm >/dev/null || { echo "fetch-npm: npm is required (apt-get install -y npm)" >&2; exit 1; }
need=()
command -v zstd >/dev/null || need+=(zstd)
command -v xz >/dev/null || need+=(xz-utils)
if ((${#need[@]})); then
    echo "fetch-npm: installing ${need[*]}" >&2
    apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [[ ! -s npm.tar.gz ]]; then
    echo "fetch-npm: downloading $PKG into $DIR (npm pack)" >&2
    rm -f -- *.tgz
    npm pack --silent --pack-destination . "$PKG" >&2
    tgz="$(ls -- *.tgz)"
    mv -- "$tgz" npm.tar.gz
fi
[[ -s npm.tar ]] || { gzip -dc npm.tar.gz > npm.tar.part && mv npm.tar.part npm.tar; }
[[ -s npm.tar.zst ]] || { zstd -q -3 -T2 npm.tar -o npm.tar.zst.part && mv npm.tar.zst.part npm.tar.zst; }
[[ -s npm.tar.xz ]] || { xz -6 -T2 -c npm.tar > npm.tar.xz.part && mv npm.tar.xz.part npm.tar.xz; }

echo "fetch-npm: $PKG: $(tar -tf npm.tar | wc -l) entries ($(tar -tvf npm.tar | grep -c '^d') directories) in $DIR/npm.tar{,.gz,.zst,.xz}" >&2
echo "$DIR"
