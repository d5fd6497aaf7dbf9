#!/usr/bin/env bash
# Usage: benches/crash-safety.sh OLD NEW [PLACE ...]      (PLACE: local slowfs netfs; default all)
#
# What crash safety (issue 28, docs/design.md "What a kill leaves") costs: two fastwrite
# binaries, before and after, extracting the botocore wheel (2,039 files, fetch-corpus.sh)
#   fresh    into a new empty folder each run (lib/fresh-dir.sh): the new binary writes in a
#            staging folder and moves its entries up at the end (a few renames a run)
#   holding  into a folder that already holds a file (lib/holding-dir.sh): the new binary
#            writes every file under a temporary name and renames it into place (a rename a
#            file)
# on each PLACE: this machine's disk, the lab's FUSE mount (lab/slowfs, no delay: the round
# trips of a userspace filesystem), and the network rig (lab/netfs: sshfs through a proxy
# adding 1 ms each way). Two hyperfine runs per case, OLD first then NEW first; every exit
# status 0 and every output's file count checked. Prints NEW over OLD per case, both orders.
#
# Env: BENCH_MIN_RUNS (default 10), BENCH_MAX_RUNS (default 20; the network rig: 3 and 3),
# FASTWRITE_BENCH_CACHE. slowfs and netfs need root, /dev/fuse and their packages (lab/slowfs
# install, lab/netfs install). Time: ~3 minutes locally, ~2 on slowfs, ~6 on the rig.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
(( $# >= 2 )) || { echo "usage: benches/crash-safety.sh OLD NEW [local|slowfs|netfs ...]" >&2; exit 2; }
OLD="$(realpath -- "$1")" NEW="$(realpath -- "$2")"
shift 2
PLACES=("$@")
((${#PLACES[@]})) || PLACES=(local slowfs netfs)
bench_lock
command -v hyperfine >/dev/null || { echo "crash-safety: hyperfine is required" >&2; exit 1; }
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
WHEEL="$("$here/fetch-corpus.sh")"
stamp="$(date +%Y%m%d-%H%M%S)"
WORK_ROOT="$CACHE/work/crash-safety-$stamp"
mkdir -p "$WORK_ROOT" "$CACHE/results"
MOUNTED=""
cleanup() {
    case "$MOUNTED" in
    slowfs) "$repo/lab/slowfs" down "$WORK_ROOT/mnt" >/dev/null 2>&1 || true ;;
    netfs) "$repo/lab/netfs" down "$WORK_ROOT/mnt" >/dev/null 2>&1 || true ;;
    esac
}
trap cleanup EXIT
EXPECTED="$(unzip -Z1 "$WHEEL" | grep -vc '/$')"

rows=()
for place in "${PLACES[@]}"; do
    min="${BENCH_MIN_RUNS:-10}" max="${BENCH_MAX_RUNS:-20}"
    case "$place" in
    local) base="$WORK_ROOT/local" ;;
    slowfs) "$repo/lab/slowfs" up "$WORK_ROOT/mnt" >/dev/null; MOUNTED=slowfs; base="$WORK_ROOT/mnt" ;;
    netfs) "$repo/lab/netfs" up "$WORK_ROOT/mnt" 1 >/dev/null; MOUNTED=netfs; base="$WORK_ROOT/mnt"
        min="${BENCH_MIN_RUNS:-3}" max="${BENCH_MAX_RUNS:-3}" ;;
    *) echo "crash-safety: unknown place '$place'" >&2; exit 2 ;;
    esac
    for shape in fresh holding; do
        prepare="$here/lib/fresh-dir.sh" want="$EXPECTED"
        [[ $shape == holding ]] && prepare="$here/lib/holding-dir.sh" want=$((EXPECTED + 1))
        jsons=()
        for order in "old new" "new old"; do
            work="$base/$shape-${order// /-}"
            mkdir -p "$work"
            json="$CACHE/results/crash-safety-$place-$shape-${order// /-}-$stamp.json"
            jsons+=("$json")
            args=(-N --min-runs "$min" --max-runs "$max" --export-json "$json")
            cmds=()
            for side in $order; do
                bin="$OLD"; [[ $side == new ]] && bin="$NEW"
                args+=(--command-name "$side" --prepare "$(q "$prepare") $(q "$work/$side")")
                cmds+=("$(q "$bin") extract $(q "$WHEEL") -o $(q "$work/$side")")
            done
            [[ $place == local ]] && wait_for_fast_creates "$WORK_ROOT"
            echo "crash-safety: $place $shape ($order)" >&2
            hyperfine "${args[@]}" "${cmds[@]}" >&2
            for side in old new; do
                BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$work/$side" --finish
                count_runs "crash-safety $place $shape $side" "$work/$side" "$want"
            done
        done
        rows+=("$("$here/lib/ab-row.py" "$place $shape" "${jsons[@]}")")
    done
    cleanup
    MOUNTED=""
done
echo "| case | old (first) | new (second) | new / old | new (first) | old (second) | new / old | both orders |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
