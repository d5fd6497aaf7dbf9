#!/usr/bin/env bash
# Usage: benches/floors.sh [create|decode ...]   (default: both)
#
# What a kernel-tree row of the matrix (benches/matrix.sh) cannot go below on this machine,
# for the rows that stay above the target:
#
#   create  File creation alone: the kernel tree with every file EMPTY (78,579 files, 5,096
#           dirs, 56 symlinks, the same names, modes and mtimes; made once from linux.tar as
#           skeleton.tar, and extracted once as the tree skeleton/), written by every tool that
#           has a kernel-tree row: fastwrite extract, GNU tar and bsdtar of skeleton.tar;
#           fastwrite mirror, fcp and xcp of skeleton/. One batch (lib/batch.sh: every run into a
#           fresh folder, every output counted and compared with GNU tar's).
#   decode  Decompression alone, to /dev/null, no files: pigz -dc, zstd -dc, xz -T2 -dc, and
#           unzip -tq of the kernel zip (Info-ZIP decodes and checks every entry on one core).
#           Then inflate three ways on the .tar.gz and on the torch wheel's biggest entry
#           (libtorch_cuda.so's deflate stream, 562 MB in / 900 MB out, wrapped as a .gz once):
#           pigz -dc (zlib, streaming), libdeflate-gunzip (whole buffer, what fastwrite uses
#           for zip entries up to 16 MiB) and rapidgzip -P 1 / -P 2 (one deflate stream decoded
#           in parallel from speculative block starts; pip, in a venv in the cache).
#
# The data alone (page-cache copies without creating many files) is the bigfiles mirror row of
# the matrix. Results go to $FASTWRITE_BENCH_CACHE/results/floors-*.
#
# Env: FASTWRITE, BENCH_RUNS (default 3), BENCH_WARMUP (default 1), FASTWRITE_BENCH_CACHE,
#      KEEP_WORK=1, and lib/batch.sh's.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/batch.sh
source "$here/lib/batch.sh"
bench_lock

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
RUNS="${BENCH_RUNS:-3}"
WARMUP="${BENCH_WARMUP:-1}"
RESULTS="$CACHE/results"
command -v hyperfine >/dev/null || { echo "floors: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
FW="$(resolve_fastwrite "$repo")"
DIR="$("$here/fetch-linux.sh")"
parts=("$@")
(( ${#parts[@]} )) || parts=(create decode)
mkdir -p "$RESULTS"

for part in "${parts[@]}"; do
    case "$part" in
    create)
        if [[ ! -s "$DIR/skeleton.tar" ]]; then
            echo "floors: making $DIR/skeleton.tar (linux.tar with every file empty, once)" >&2
            python3 - "$DIR/linux.tar" "$DIR/skeleton.tar.part" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as src, tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT) as out:
    for m in src:
        if m.isfile():
            m.size = 0
        out.addfile(m)
PY
            mv -- "$DIR/skeleton.tar.part" "$DIR/skeleton.tar"
        fi
        SKEL="$DIR/skeleton"
        if [[ ! -e "$DIR/skeleton.done" ]]; then
            [[ -e "$SKEL" ]] && cleanup_workdir "$SKEL"
            mkdir -p "$SKEL"
            tar -xf "$DIR/skeleton.tar" -C "$SKEL" --strip-components=1
            sync
            touch "$DIR/skeleton.done"
        fi
        EXPECTED_FILES="$(find "$SKEL" -type f | wc -l)"
        WORK="$CACHE/work/floors-create-$(date +%Y%m%d-%H%M%S)"
        mkdir -p "$WORK"
        trap 'report_failure floors "$WORK"' EXIT
        reset_batch
        tops=()
        while IFS= read -r -d '' e; do tops+=("$e"); done \
            < <(find "$SKEL" -mindepth 1 -maxdepth 1 -print0 | sort -z)
        # --strip-components=1 everywhere, so that every output is the tree itself.
        add gnu-tar tar -xf "$DIR/skeleton.tar" -C "$WORK/gnu-tar" --strip-components=1
        if have bsdtar; then add bsdtar bsdtar -xf "$DIR/skeleton.tar" -C "$WORK/bsdtar" --strip-components 1; fi
        if have fcp; then add fcp fcp "${tops[@]}" "$WORK/fcp"; fi
        if have xcp; then add xcp xcp -r -T --no-progress "$SKEL" "$WORK/xcp"; fi
        add fastwrite-mirror "$FW" mirror "$SKEL" "$WORK/fastwrite-mirror"
        add fastwrite "$FW" extract --strip-components 1 "$DIR/skeleton.tar" -o "$WORK/fastwrite"
        # As mirror-peers.sh: free memory filled with clean page cache first, not dropped.
        BENCH_FILL_MEMORY=1 BENCH_DROP_CACHES=0 run_batch floors-create "$EXPECTED_FILES" gnu-tar "$DIR/skeleton.tar"
        if [[ "${KEEP_WORK:-0}" != 1 ]]; then cleanup_workdir "$WORK"; fi
        ;;
    decode)
        stamp="$(date +%Y%m%d-%H%M%S)"
        ZIP="$("$here/fetch-corpus.sh" kernel)"
        for f in "$DIR/linux.tar.gz" "$DIR/linux.tar.zst" "$DIR/linux.tar.xz" "$ZIP"; do cat -- "$f" >/dev/null; done
        warn_if_busy
        hyperfine -N --warmup "$WARMUP" --runs "$RUNS" \
            --export-markdown "$RESULTS/floors-decode-$stamp.md" --export-json "$RESULTS/floors-decode-$stamp.json" \
            --output=null \
            --command-name "pigz -dc (.tar.gz)" "pigz -dc $(q "$DIR/linux.tar.gz")" \
            --command-name "zstd -dc (.tar.zst)" "zstd -dc $(q "$DIR/linux.tar.zst")" \
            --command-name "xz -T2 -dc (.tar.xz)" "xz -T2 -dc $(q "$DIR/linux.tar.xz")" \
            --command-name "unzip -tq (kernel zip, one core)" "unzip -tq $(q "$ZIP")"
        echo "results: $RESULTS/floors-decode-$stamp.md"

        command -v libdeflate-gunzip >/dev/null || apt-get install -y -qq libdeflate-tools >/dev/null
        rgz="$CACHE/rapidgzip-venv/bin/rapidgzip"
        if [[ ! -x "$rgz" ]]; then
            python3 -m venv "$CACHE/rapidgzip-venv"
            "$CACHE/rapidgzip-venv/bin/pip" install --quiet "rapidgzip==0.16.2"
        fi
        cuda="$CACHE/torch-libtorch_cuda.gz"
        if [[ ! -s "$cuda" ]]; then
            python3 "$here/lib/zip-entry-as-gz.py" "$("$here/fetch-corpus.sh" torch)" torch/lib/libtorch_cuda.so "$cuda.part"
            mv -- "$cuda.part" "$cuda"
        fi
        cat -- "$cuda" >/dev/null
        inflate=()
        for pair in ".tar.gz:$DIR/linux.tar.gz" "libtorch_cuda.so:$cuda"; do
            name="${pair%%:*}" f="$(q "${pair#*:}")"
            inflate+=(--command-name "pigz -dc ($name)" "pigz -dc $f"
                --command-name "libdeflate-gunzip -c ($name)" "libdeflate-gunzip -c $f"
                --command-name "rapidgzip -P 1 ($name)" "$(q "$rgz") -P 1 -d -c $f"
                --command-name "rapidgzip -P 2 ($name)" "$(q "$rgz") -P 2 -d -c $f")
        done
        hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --output=null \
            --export-markdown "$RESULTS/floors-inflate-$stamp.md" --export-json "$RESULTS/floors-inflate-$stamp.json" \
            "${inflate[@]}"
        echo "results: $RESULTS/floors-inflate-$stamp.md"
        ;;
    *) echo "floors: unknown part '$part' (create or decode)" >&2; exit 2 ;;
    esac
done
