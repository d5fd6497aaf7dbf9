#!/usr/bin/env bash
# Usage: benches/matrix.sh [--docs] [ROW ...]
#
# The benchmark matrix: every corpus against its best peer, one hyperfine batch per row, and
# one table of ratios and peak memory. Rows (default: all, in this order):
#
#   botocore    botocore wheel (2,039 files)              ripunzip          zip-peers.sh
#   scipy       scipy 1.17.1 wheel (1,425 files, 114 MB)  ripunzip          zip-peers.sh
#   torch       torch 2.5.1 wheel (11,269 files, 1.75 GB) ripunzip          zip-peers.sh
#   kernel-zip  kernel tree zipped by Info-ZIP (78,579)   ripunzip          zip-peers.sh
#   tar         kernel .tar                               bsdtar            tar-peers.sh
#   tar.gz      kernel .tar.gz                            pigz -dc | tar    tar-peers.sh
#   tar.zst     kernel .tar.zst                           zstd -dc | tar    tar-peers.sh
#   tar.xz      kernel .tar.xz (Debian's, 55 xz blocks)   xz -T2 -dc | tar  tar-peers.sh
#   npm         @mui/icons-material tgz (43,010 files)    GNU tar           tar-peers.sh
#   mirror-kernel    fresh copy of the kernel tree        xcp, fcp          mirror-peers.sh
#                    and a no-op rerun onto a copy        rsync -a
#   mirror-bigfiles  fresh copy of 8 x 128 MiB            cp -a, fcp        mirror-peers.sh
#                    and a no-op rerun                    rsync -a
#
# The best peer of each row is the fastest tool other than fastwrite in the full per-script
# benches (docs/benchmarks.md); here only it (or both, where two are close) and fastwrite run,
# so that the matrix takes about an hour rather than a day. Each row is the per-script bench
# with BENCH_TOOLS set, so everything those scripts do holds here: every run into a fresh
# folder, every exit status checked, every output tree counted and compared with the other
# tool's (the copies' metadata with the source's), file creation settled before each batch.
# Every command runs under GNU time for its peak RSS (BENCH_RSS=1, lib/batch.sh): the same
# extra fork and exec for each tool.
#
# Outputs are kept until the disk runs short (a batch of the kernel tree holds up to 18 GB),
# then all deleted at once: each delete makes the next batch wait ~6 minutes for ext4 (see
# lib/common.sh), so fewer deletes is a shorter matrix.
#
# The table goes to $FASTWRITE_BENCH_CACHE/results/matrix-STAMP.md; with --docs it also
# replaces the table between the matrix markers in docs/benchmarks.md and README.md.
#
# Env: FASTWRITE (binary; default target/release/fastwrite), BENCH_RUNS (timed runs per tool;
#      default 3, 10 for the three small corpora), BENCH_WARMUP (default 1),
#      FASTWRITE_BENCH_CACHE, and the per-script variables.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
# No bench_lock here: each script takes it for its own batches.

docs=0
if [[ "${1:-}" == --docs ]]; then
    docs=1
    shift
fi
all=(botocore scipy torch kernel-zip tar tar.gz tar.zst tar.xz npm mirror-kernel mirror-bigfiles)
rows=("$@")
(( ${#rows[@]} )) || rows=("${all[@]}")
for row in "${rows[@]}"; do
    [[ " ${all[*]} " == *" $row "* ]] || { echo "matrix: unknown row '$row' (${all[*]})" >&2; exit 2; }
done

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
RESULTS="$CACHE/results"
mkdir -p "$RESULTS" "$CACHE/work"
FW="$(resolve_fastwrite "$repo")"
export FASTWRITE="$FW"
stamp="$(date +%Y%m%d-%H%M%S)"
LOG="$RESULTS/matrix-$stamp.log"      # ROW<TAB>TAG<TAB>JSON, one line per batch
BATCHES="$RESULTS/matrix-$stamp.batches"  # what the scripts append (lib/batch.sh)
: > "$LOG"
: > "$BATCHES"
RUNS="${BENCH_RUNS:-3}"
WARMUP="${BENCH_WARMUP:-1}"
export BENCH_RESULTS_LOG="$BATCHES" BENCH_RSS=1 KEEP_WORK=1 BENCH_WARMUP="$WARMUP"

# The work dirs this matrix made (new entries of $CACHE/work), deleted when the disk runs short
# and at the end.
before_work="$(ls -A "$CACHE/work")"
ours() { comm -13 <(printf '%s\n' "$before_work" | sort) <(ls -A "$CACHE/work" | sort) | grep -v '^$' || true; }
clean_ours() {
    local d
    while IFS= read -r d; do
        [[ -n "$d" ]] || continue
        echo "matrix: deleting $CACHE/work/$d" >&2
        rm -rf -- "${CACHE:?}/work/$d"
    done < <(ours)
    sync
    touch "$SETTLE_MARKER"  # the next batch waits out ext4's inode-reuse delay
}
trap 'echo "matrix: stopped; outputs kept in $CACHE/work (the new dirs since $stamp)" >&2' ERR

# need_room GB: delete this matrix's outputs first if fewer than GB (plus 4) are free.
need_room() {
    local avail_gb
    avail_gb=$(( $(df -Pk "$CACHE/work" | awk 'NR == 2 { print $4 }') >> 20 ))
    if (( avail_gb < $1 + 4 )); then
        echo "matrix: $avail_gb GiB free, the next row needs ~$1: deleting the outputs so far" >&2
        clean_ours
    fi
}

# row NAME OUT_GB TOOLS RUNS -- COMMAND...: one row (the command's batches all belong to it).
row() {
    local name="$1" out_gb="$2" tools="$3" runs="$4" line n
    shift 5
    local ntools
    ntools="$(wc -w <<<"$tools")"
    need_room $(( out_gb * ntools * (runs + WARMUP) / 10 + 1 ))
    echo "=== matrix: $name ($tools; $runs runs + $WARMUP warmup)" >&2
    n="$(wc -l < "$BATCHES")"
    BENCH_TOOLS="$tools" BENCH_RUNS="$runs" "$@"
    tail -n +"$((n + 1))" "$BATCHES" | while IFS= read -r line; do
        printf '%s\t%s\n' "$name" "$line" >> "$LOG"
    done
}

small_runs="${BENCH_RUNS:-10}"
for r in "${rows[@]}"; do
    # OUT_GB in tenths of a GB: one tool's output of one run.
    case "$r" in
        botocore) row "$r" 1 "ripunzip fastwrite" "$small_runs" -- env ZIP_CORPUS=botocore "$here/zip-peers.sh" ;;
        scipy) row "$r" 2 "ripunzip fastwrite" "$small_runs" -- env ZIP_CORPUS=scipy "$here/zip-peers.sh" ;;
        torch) row "$r" 18 "ripunzip fastwrite" "$RUNS" -- env ZIP_CORPUS=torch "$here/zip-peers.sh" ;;
        kernel-zip) row "$r" 14 "ripunzip fastwrite" "$RUNS" -- env ZIP_CORPUS=kernel "$here/zip-peers.sh" ;;
        tar) row "$r" 14 "bsdtar fastwrite" "$RUNS" -- "$here/tar-peers.sh" tar ;;
        tar.gz) row "$r" 14 "pigz-tar fastwrite" "$RUNS" -- "$here/tar-peers.sh" tar.gz ;;
        tar.zst) row "$r" 14 "zstd-tar fastwrite" "$RUNS" -- "$here/tar-peers.sh" tar.zst ;;
        tar.xz) row "$r" 14 "xz-tar fastwrite" "$RUNS" -- "$here/tar-peers.sh" tar.xz ;;
        npm) row "$r" 3 "gnu-tar fastwrite" "$small_runs" -- env TAR_CORPUS=npm "$here/tar-peers.sh" tar.gz ;;
        mirror-kernel) row "$r" 15 "xcp fcp fastwrite" "$RUNS" -- env MIRROR_NOOP_TOOLS="rsync fastwrite" "$here/mirror-peers.sh" kernel ;;
        mirror-bigfiles) row "$r" 11 "cp fcp fastwrite" "$RUNS" -- env MIRROR_NOOP_TOOLS="rsync fastwrite" "$here/mirror-peers.sh" bigfiles ;;
    esac
done

# Which fastwrite: the commit, "+changes" if the code differs from it (not docs or benches),
# and the binary's own hash, which is what was timed.
commit="$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no -- src Cargo.toml Cargo.lock 2>/dev/null)" ]]; then commit+="+changes"; fi
commit+=" (binary sha256 $(sha256sum "$FW" | cut -c1-12))"
table="$RESULTS/matrix-$stamp.md"
python3 "$here/lib/matrix-table.py" "$LOG" \
    --title "fastwrite $commit, $(date +%Y-%m-%d), $(nproc) cores, $(uname -r), $(df -PT "$CACHE/work" | awk 'NR == 2 { print $2 }')" \
    > "$table"
cat "$table"
echo "matrix: table in $table" >&2
if (( docs )); then
    for doc in docs/benchmarks.md README.md; do
        python3 "$here/lib/matrix-table.py" --splice "$repo/$doc" "$table"
        echo "matrix: $doc updated" >&2
    done
fi
if [[ "${KEEP_WORK_MATRIX:-0}" != 1 ]]; then clean_ours; fi
