#!/usr/bin/env bash
# Usage: benches/mirror-peers.sh [bigfiles|kernel ...]   (default: bigfiles kernel)
#
# Times `fastwrite mirror SRC DST` against `cp -a`, `rsync -a`, xcp and fcp with hyperfine, on
# two source trees made by fetch-trees.sh: "bigfiles" (8 x 128 MiB of random bytes in 3 dirs)
# and "kernel" (the Linux kernel tree: 78,579 files, 5,096 dirs, 56 symlinks, 1.3 GB). Per tree:
#
# 1. Fresh copy: each run copies SRC's contents into a brand-new empty dir (lib/fresh-dir.sh,
#    as in the extraction benches; nothing is deleted during a batch), in each tool's form that
#    puts SRC's contents directly in the dir (see the contenders below). Every exit status is
#    checked, every output's file count, the reference (cp -a) output's content against SRC and
#    every other tool's against cp's (lib/batch.sh), and then each tool's first output's
#    metadata against SRC (lib/compare-trees.py: types, sizes, symlink targets, modes, owners,
#    mtimes, hard links). Missing or extra entries, or other types, sizes or symlink targets,
#    fail the bench for every tool; other metadata differences fail it only for the tools in
#    MIRROR_STRICT (cp and fastwrite: an exact copy is their job) and are reported for the rest.
# 2. No-op: `rsync -a SRC/ COPY/` against `fastwrite mirror SRC COPY` where COPY is already an
#    identical copy (the cp -a output of the first run of step 1, reused by every run: nothing
#    changes). Before, one untimed run of each tool shows how many entries it replaced or
#    touched (inode and ctime); before and after the batch COPY must still equal SRC (diff -r,
#    a file count and every metadata check above).
# After each tree its outputs are deleted; a tree with few inodes (bigfiles) deletes only its
# outputs (~300 inodes: a 2,000-file creation probe right after such a delete took 25 ms
# against 24 ms before, so the next batch need not wait out ext4's inode-reuse delay, and its
# own probe still checks), any other does the full cleanup and the next batch waits (see
# lib/common.sh). Each fresh-copy batch starts with all free memory but 1 GiB filled with
# clean page cache (lib/common.sh, fill_free_memory: a batch writes 4-36 GB, and without this
# the runs that happened to get long-free memory were up to 8x slower than the same tool's runs
# that did not), and so without dropping caches first. Defaults take about 6-10 minutes, plus
# up to ~6 minutes waiting out an earlier bench's delete.
#
# Env:
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite)
#   MIRROR_FASTWRITE=0     leave out the fastwrite rows (peers only; ratios are then to the fastest)
#   BENCH_RUNS             timed runs per command in a fresh-copy batch (default 3)
#   BENCH_WARMUP           warmup runs per command (default 1)
#   BENCH_NOOP_RUNS        timed runs per command in a no-op batch (default 10)
#   BENCH_TOOLS            only these fresh-copy tools (names as below: cp rsync xcp fcp
#                          fastwrite-no-defer-close fastwrite); without cp, fastwrite's output
#                          is the reference and the no-op copy
#   MIRROR_NOOP=0          leave out the no-op batch
#   MIRROR_NOOP_TOOLS      only these no-op tools (rsync fastwrite)
#   BENCH_RSS=1, BENCH_RESULTS_LOG: peak RSS per tool and run; a log of the results (lib/batch.sh)
#   MIRROR_STRICT          tools whose copies must match SRC's metadata exactly
#                          (default: "cp fastwrite fastwrite-no-defer-close")
#   BENCH_FILL_MEMORY=0    don't fill free memory before fresh-copy batches (then
#                          BENCH_DROP_CACHES applies as in zip-peers.sh)
#   BENCH_FILL_FREE_MIB    free memory left unfilled (default 1024)
#   FASTWRITE_BENCH_CACHE, BENCH_SYNC, BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX,
#   KEEP_WORK=1: as in zip-peers.sh.
# Disk: a fresh-copy batch holds (runs + warmup) x tools x the tree until it ends (kernel: 6
# tools x 4 x 1.5 GB = ~36 GB by default; bigfiles ~26 GB), besides the two trees (~2.6 GB);
# a batch that would not fit is refused before it starts.
#
# Results (markdown + JSON) go to $FASTWRITE_BENCH_CACHE/results/, never the repo.
# Peer tools that are not installed are skipped with a message (cargo install xcp fcp;
# apt-get install rsync).
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
NOOP_RUNS="${BENCH_NOOP_RUNS:-10}"
STRICT="${MIRROR_STRICT-cp fastwrite fastwrite-no-defer-close}"
export BENCH_FILL_MEMORY="${BENCH_FILL_MEMORY:-1}"
if [[ "$BENCH_FILL_MEMORY" == 1 ]]; then
    # Dropping would free memory only to fill it again, and leave the source tree's pages
    # read once, so that reclaim would take them before the fill's.
    export BENCH_DROP_CACHES=0
fi
command -v hyperfine >/dev/null || { echo "mirror-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
command -v rsync >/dev/null || { echo "mirror-peers: rsync is required (apt-get install -y rsync)" >&2; exit 1; }
FW=""
if [[ "${MIRROR_FASTWRITE:-1}" != 0 ]]; then
    FW="$(resolve_fastwrite "$repo")"
    if ! "$FW" mirror --help >/dev/null 2>&1; then
        echo "mirror-peers: $FW has no mirror subcommand (cargo build --release; or MIRROR_FASTWRITE=0 for the peers alone)" >&2
        exit 1
    fi
    echo "mirror-peers: fastwrite = $FW" >&2
fi
peers="$(cp --version | sed -n 1p); $(rsync --version | sed -n 1p | tr -s ' ')"  # sed, not head: no SIGPIPE under pipefail
if command -v xcp >/dev/null; then peers+="; $(xcp --version)"; fi
if command -v fcp >/dev/null; then peers+="; fcp $(fcp --version 2>&1 || true)"; fi  # on stderr, and exits 1
echo "mirror-peers: peers: $peers" >&2

corpora=("$@")
(( ${#corpora[@]} )) || corpora=(bigfiles kernel)
ROOT="$CACHE/work/mirror-peers-$(date +%Y%m%d-%H%M%S)"
RESULTS="$CACHE/results"
mkdir -p "$ROOT" "$RESULTS"
WORK="$ROOT"
trap 'report_failure mirror-peers "$ROOT"' EXIT
compare_trees() { python3 "$here/lib/compare-trees.py" "$@"; }

# same_tree SRC COPY WHAT: COPY must equal SRC in content (diff -r), file count and every bit of
# metadata that compare-trees.py checks; used around the no-op batch.
same_tree() {
    local src="$1" copy="$2" what="$3" a b
    a="$(find "$src" -type f | wc -l)"
    b="$(find "$copy" -type f | wc -l)"
    if (( a != b )) || ! diff -rq --no-dereference "$src" "$copy" >/dev/null \
        || ! compare_trees compare "$src" "copy=$copy" --strict copy >/dev/null; then
        echo "mirror-peers: VERIFY $what: $copy is no longer an identical copy of $src ($b files, want $a)" >&2
        compare_trees compare "$src" "copy=$copy" >&2 || true
        return 1
    fi
    echo "mirror-peers: $what: $copy is an identical copy of $src ($a files, content and metadata)" >&2
}

# Only now, after a corpus's batches: deleting during a batch would skew its timings.
cleanup_corpus() {
    if [[ "${KEEP_WORK:-0}" == 1 ]]; then
        echo "outputs kept in $WORK" >&2
    elif (( $(find "$WORK"/*.runs | head -n 1000 | wc -l) < 1000 )); then
        rm -rf -- "$WORK"/*.runs "$WORK/noop.snapshot"  # few inodes: see the top of this file
        sync
    else
        cleanup_workdir "$WORK"
    fi
}

for corpus in "${corpora[@]}"; do
    SRC="$("$here/fetch-trees.sh" "$corpus")"
    EXPECTED_FILES="$(find "$SRC" -type f | wc -l)"
    WORK="$ROOT/$corpus"
    mkdir -p "$WORK"
    reset_batch

    # --- 1. fresh copy -------------------------------------------------------------------------
    # Each command copies into the fixed path $WORK/<name>, which lib/batch.sh makes a brand-new
    # EMPTY dir before every run, so every form here must put SRC's contents in that dir, not SRC
    # itself as a subdir: `cp -a SRC/. DIR`; `rsync -a SRC/ DIR/`; `xcp -r -T` (without -T, xcp
    # copies SRC into an existing DIR as DIR/SRC's name, like cp); fcp copies a source into an
    # existing dir as DIR/its name whatever the spelling (even SRC/.), so it gets SRC's top-level
    # entries as its sources, as `fcp SRC/* DIR` would (dot files included). Peers first,
    # fastwrite last, as in the other benches (with free memory filled, the order should not
    # matter).
    tops=()
    while IFS= read -r -d '' e; do tops+=("$e"); done \
        < <(find "$SRC" -mindepth 1 -maxdepth 1 -print0 | sort -z)
    add cp cp -a "$SRC/." "$WORK/cp"
    add rsync rsync -a "$SRC/" "$WORK/rsync/"
    if have xcp; then add xcp xcp -r -T --no-progress "$SRC" "$WORK/xcp"; fi
    if have fcp; then add fcp fcp "${tops[@]}" "$WORK/fcp"; fi
    if [[ -n "$FW" ]]; then
        add fastwrite-no-defer-close "$FW" --no-defer-close mirror "$SRC" "$WORK/fastwrite-no-defer-close"
        add fastwrite "$FW" mirror "$SRC" "$WORK/fastwrite"
    fi
    # Every output stays until the batch ends: refuse to start what the disk cannot hold (a full
    # disk fails the last rows, fastwrite's, after minutes of runs).
    need_kb=$(( $(du -sk "$SRC" | cut -f1) * (RUNS + WARMUP) * ${#names[@]} + 2 * 1024 * 1024 ))
    avail_kb="$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')"
    if (( avail_kb < need_kb )); then
        echo "mirror-peers-$corpus: needs $((need_kb >> 20)) GiB of disk ($(( RUNS + WARMUP )) runs x ${#names[@]} tools x $(du -sh "$SRC" | cut -f1), plus 2 GiB), only $((avail_kb >> 20)) GiB free (lower BENCH_RUNS or free some space)" >&2
        exit 1
    fi
    run_batch "mirror-peers-$corpus" "$EXPECTED_FILES" cp "$SRC"

    # lib/batch.sh compared every tool's content with the reference's (cp's, unless
    # BENCH_TOOLS left it out); now the reference's with SRC itself, and every tool's metadata
    # with SRC's.
    if ! diff -rq --no-dereference "$SRC" "$WORK/$BATCH_REFERENCE.runs/1" >/dev/null; then
        echo "mirror-peers-$corpus: VERIFY $BATCH_REFERENCE: content differs from the source $SRC" >&2
        exit 1
    fi
    pairs=()
    strict=""
    for name in "${names[@]}"; do
        pairs+=("$name=$WORK/$name.runs/1")
        if [[ " $STRICT " == *" $name "* ]]; then strict+="${strict:+,}$name"; fi
    done
    echo
    compare_trees compare "$SRC" "${pairs[@]}" --strict "$strict"
    echo "mirror-peers-$corpus: fidelity checked (strict for: ${strict:-none})" >&2

    # --- 2. no-op: mirror again onto an identical copy ----------------------------------------
    # cp's copy, or fastwrite's where BENCH_TOOLS left cp out (either is checked exact first).
    COPY=""
    for name in cp fastwrite; do
        if [[ " ${names[*]} " == *" $name "* ]]; then COPY="$WORK/$name.runs/1"; break; fi
    done
    if [[ "${MIRROR_NOOP:-1}" == 0 || -z "$COPY" ]]; then
        [[ -n "$COPY" ]] || echo "mirror-peers-$corpus: no cp or fastwrite copy to mirror onto; no-op batch skipped" >&2
        cleanup_corpus
        continue
    fi
    same_tree "$SRC" "$COPY" "no-op, before"
    reset_batch
    BENCH_TOOLS="${MIRROR_NOOP_TOOLS:-}" add rsync rsync -a "$SRC/" "$COPY/"
    if [[ -n "$FW" ]]; then BENCH_TOOLS="${MIRROR_NOOP_TOOLS:-}" add fastwrite "$FW" mirror "$SRC" "$COPY"; fi
    echo
    echo "mirror-peers-$corpus-noop: what one run changes in an identical copy (untimed)"
    for i in "${!names[@]}"; do
        compare_trees snapshot "$COPY" "$WORK/noop.snapshot"
        # The words of cmds[i] are quoted for hyperfine -N; eval undoes exactly that quoting.
        eval "${cmds[$i]}" >/dev/null
        printf '%-28s %s\n' "${names[$i]}" "$(compare_trees changed "$COPY" "$WORK/noop.snapshot")"
    done
    same_tree "$SRC" "$COPY" "no-op, after the untimed runs"
    stamp="$(date +%Y%m%d-%H%M%S)"
    md="$RESULTS/mirror-peers-$corpus-noop-$stamp.md"
    json="$RESULTS/mirror-peers-$corpus-noop-$stamp.json"
    args=(-N --warmup "$WARMUP" --runs "$NOOP_RUNS" --export-markdown "$md" --export-json "$json")
    for i in "${!names[@]}"; do args+=(--command-name "${names[$i]}" --prepare sync); done
    warn_if_busy
    echo "mirror-peers-$corpus-noop: $EXPECTED_FILES files already in place, $NOOP_RUNS runs + $WARMUP warmup per tool" >&2
    rss_start
    hyperfine "${args[@]}" "${cmds[@]}"
    rss_collect "$json"
    same_tree "$SRC" "$COPY" "no-op, after the batch"
    log_results "mirror-peers-$corpus-noop" "$json"
    echo
    print_ratios "mirror-peers-$corpus-noop" "$json"
    echo "results: $md"
    echo "         $json"

    cleanup_corpus
done

if [[ "${KEEP_WORK:-0}" != 1 ]]; then
    cleanup_workdir "$ROOT"
fi
