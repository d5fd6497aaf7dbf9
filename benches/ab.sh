#!/usr/bin/env bash
# Usage: benches/ab.sh OLD NEW
#
# Two fastwrite binaries side by side (say, before and after a change to the engine), on the
# command line's own jobs: extracting the botocore wheel (2,039 files, fetch-corpus.sh), the
# generated small corpus as .zip and .tar (2,000 files of 1-8 KiB, lib/gen-corpus.py), and
# mirroring that corpus's tree into an empty folder. Two hyperfine runs per job, OLD first and
# then NEW first: on these machines whatever runs later in a batch tends to be slower (the
# filesystem fills with the batch's output), so each side gets each place once. Every run into
# a fresh folder (lib/fresh-dir.sh), every exit status 0, every output tree's file count and
# bytes checked against the input. Prints NEW's time over OLD's per job, per order and over both.
#
# Env: BENCH_MIN_RUNS (default 15), BENCH_MAX_RUNS (default 30), FASTWRITE_BENCH_CACHE,
# BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX (as in zip-peers.sh). Time: ~5 minutes, plus any wait for an earlier
# bench's deletes.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
(( $# == 2 )) || { echo "usage: benches/ab.sh OLD NEW" >&2; exit 2; }
OLD="$(realpath -- "$1")" NEW="$(realpath -- "$2")"
bench_lock
command -v hyperfine >/dev/null || { echo "ab: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
MIN_RUNS="${BENCH_MIN_RUNS:-15}" MAX_RUNS="${BENCH_MAX_RUNS:-30}"

WHEEL="$("$here/fetch-corpus.sh")"
SMALL="$CACHE/close-lab/small"
if [[ ! -e "$SMALL/done" ]]; then
    rm -rf "$SMALL.part"
    python3 "$here/lib/gen-corpus.py" small "$SMALL.part"
    mv "$SMALL.part" "$SMALL" && touch "$SMALL/done"
fi
stamp="$(date +%Y%m%d-%H%M%S)"
WORK_ROOT="$CACHE/work/ab-$stamp"
mkdir -p "$WORK_ROOT" "$CACHE/results"
trap 'report_failure ab "$WORK_ROOT"' EXIT

# The wheel's expected tree: what unzip makes of it (files and bytes are what is checked).
mkdir -p "$WORK_ROOT/reference"
unzip -q "$WHEEL" -d "$WORK_ROOT/reference/wheel"
count() { find "$1" -type f -printf '%s\n' | awk '{ n++; b += $1 } END { print n+0, b+0 }'; }

declare -A JOB=(
    [wheel]="extract $(q "$WHEEL") -o"
    [small-zip]="extract $(q "$SMALL/corpus.zip") -o"
    [small-tar]="extract $(q "$SMALL/corpus.tar") -o"
    [mirror]="mirror $(q "$SMALL/tree")"
)
declare -A EXPECT=(
    [wheel]="$(count "$WORK_ROOT/reference/wheel")"
    [small-zip]="$(count "$SMALL/tree")"
    [small-tar]="$(count "$SMALL/tree")"
    [mirror]="$(count "$SMALL/tree")"
)
rows=()
for job in wheel small-zip small-tar mirror; do
    jsons=()
    for order in "old new" "new old"; do
        WORK="$WORK_ROOT/$job-${order// /-}"
        mkdir -p "$WORK"
        json="$CACHE/results/ab-$job-${order// /-}-$stamp.json"
        jsons+=("$json")
        args=(-N --min-runs "$MIN_RUNS" --max-runs "$MAX_RUNS" --export-json "$json")
        cmds=()
        for side in $order; do
            bin="$OLD"; [[ "$side" == new ]] && bin="$NEW"
            args+=(--command-name "$side" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/$side")")
            cmds+=("$(q "$bin") ${JOB[$job]} $(q "$WORK/$side")")
        done
        wait_for_fast_creates "$WORK_ROOT"
        warn_if_busy
        echo "ab: $job ($order)" >&2
        hyperfine "${args[@]}" "${cmds[@]}"
        for side in old new; do
            BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$side" --finish
            for run in "$WORK/$side.runs"/*; do
                got="$(count "$run")"
                [[ "$got" == "${EXPECT[$job]}" ]] ||
                    { echo "ab: VERIFY $job $side $run: $got (expected ${EXPECT[$job]})" >&2; exit 1; }
            done
        done
    done
    rows+=("$("$here/lib/ab-row.py" --stddev "$job" "${jsons[@]}")")
done
echo "| job | old (first) | new (second) | new / old | new (first) | old (second) | new / old | both orders: new / old |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
trap - EXIT
cleanup_workdir "$WORK_ROOT"
