#!/usr/bin/env bash
# Usage: benches/tar-peers.sh [tar|tar.gz|tar.zst|tar.xz ...]   (default: all four)
#
# Times fastwrite against GNU tar, bsdtar, `pigz -dc | tar -x`, `zstd -dc | tar -x` and
# `xz -dc -T2 | tar -x` on the Linux kernel tree (benches/fetch-linux.sh: ~78,000 files,
# 1.3 GB) or, with TAR_CORPUS=npm, on an npm package tarball (benches/fetch-npm.sh:
# @mui/icons-material, 43,010 small files, no directory entries), one hyperfine batch per
# format, each run into a fresh folder, every exit status
# and every output tree checked (lib/batch.sh). Between batches the outputs are deleted and
# the next batch waits until file creation is fast again (lib/common.sh explains why).
#
# Env: TAR_CORPUS (linux, the default, or npm), FASTWRITE (binary), BENCH_RUNS (default 3),
#      FASTWRITE_OLD (a second binary, timed in the same batch as fastwrite-old),
#      BENCH_LEAN=1 (only GNU tar, the format's decoder piped into tar, and fastwrite),
#      BENCH_WARMUP (default 1),
#      FASTWRITE_BENCH_CACHE, BENCH_PROBE_MS, BENCH_SETTLE_MAX, KEEP_WORK=1,
#      BENCH_TOOLS (only these: gnu-tar bsdtar pigz-tar zstd-tar xz-tar fastwrite ...),
#      BENCH_RSS=1 (peak RSS per tool and run), BENCH_RESULTS_LOG (lib/batch.sh).
# Disk: each batch holds (runs + warmup) x tools x 1.3 GB until it ends (~21 GB by default).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/batch.sh
source "$here/lib/batch.sh"
bench_lock  # one bench at a time on this machine

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
RUNS="${BENCH_RUNS:-3}"
WARMUP="${BENCH_WARMUP:-1}"
command -v hyperfine >/dev/null || { echo "tar-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
FW="$(resolve_fastwrite "$repo")"
CORPUS="${TAR_CORPUS:-linux}"
case "$CORPUS" in
    linux) DIR="$("$here/fetch-linux.sh")"; tag=tar-peers ;;
    npm) DIR="$("$here/fetch-npm.sh")"; tag=tar-peers-npm ;;
    *) echo "tar-peers: unknown TAR_CORPUS '$CORPUS' (linux or npm)" >&2; exit 2 ;;
esac
EXPECTED_FILES="$(tar -tvf "$DIR/$CORPUS.tar" | grep -c '^[-h]')"  # regular files + hard links
RESULTS="$CACHE/results"
mkdir -p "$RESULTS"

formats=("$@")
(( ${#formats[@]} )) || formats=(tar tar.gz tar.zst tar.xz)

# A pipeline as one timed command; pipefail so a failing decoder fails the run.
pipe() { add "$1" bash -c "set -o pipefail; $2"; }

for fmt in "${formats[@]}"; do
    A="$DIR/$CORPUS.$fmt"
    [[ -s "$A" ]] || { echo "tar-peers: no $A" >&2; exit 1; }
    WORK="$CACHE/work/$tag-$fmt-$(date +%Y%m%d-%H%M%S)"
    mkdir -p "$WORK"
    trap 'report_failure tar-peers "$WORK"' EXIT
    reset_batch
    # Peers first, fastwrite last: each command's runs go back to back and a batch slows as
    # the page cache fills, so this order can only flatter the peers.
    add gnu-tar tar -xf "$A" -C "$WORK/gnu-tar"
    if [[ ${BENCH_LEAN:-0} != 1 ]] && have bsdtar; then add bsdtar bsdtar -xf "$A" -C "$WORK/bsdtar"; fi
    case "$fmt" in
        tar.gz) pipe pigz-tar "pigz -dc '$A' | tar -x -C '$WORK/pigz-tar'" ;;
        tar.zst) pipe zstd-tar "zstd -dc '$A' | tar -x -C '$WORK/zstd-tar'" ;;
        tar.xz) pipe xz-tar "xz -dc -T2 '$A' | tar -x -C '$WORK/xz-tar'" ;;
    esac
    if [[ ${BENCH_LEAN:-0} != 1 ]]; then
        add fastwrite-no-defer-close "$FW" --no-defer-close extract "$A" -o "$WORK/fastwrite-no-defer-close"
    fi
    if [[ -n "${FASTWRITE_OLD:-}" ]]; then
        add fastwrite-old "$(realpath -- "$FASTWRITE_OLD")" extract "$A" -o "$WORK/fastwrite-old"
    fi
    add fastwrite "$FW" extract "$A" -o "$WORK/fastwrite"
    run_batch "$tag-$fmt" "$EXPECTED_FILES" gnu-tar "$A"
    if [[ "${KEEP_WORK:-0}" != 1 ]]; then
        cleanup_workdir "$WORK"
    fi
done
