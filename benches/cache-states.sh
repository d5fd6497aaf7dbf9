#!/usr/bin/env bash
# Usage: benches/cache-states.sh [CORPUS]        (default: torch; see fetch-corpus.sh)
#
# Who pays for the kernel's write-back. A run that writes gigabytes leaves them dirty in the page
# cache when it exits, and what the next run meets depends on what was done in between; two
# benches that prepare the cache differently disagree. This one runs fastwrite and its peer
# (ripunzip) on the same wheel in four states of the cache, alternating which goes first in
# each round, each run into a folder of its own (nothing is deleted until the end), and for every
# run records its wall, user and system time (GNU time) and the dirty and write-back MiB at its
# start (/proc/meminfo):
#
#   synced   `sync` before each run (untimed): it starts with nothing dirty, the wheel cached.
#            What benches/matrix.sh and zip-peers.sh measure.
#   dirty    no sync: each run starts while the previous run's output is still being written
#            back, and the kernel throttles a writer once too much is dirty.
#   dropped  `sync` and the page cache dropped before each run: the wheel is read from disk.
#   filled   `sync`, then the free memory filled with clean page cache (lib/common.sh
#            fill_free_memory): every page a run writes must first be reclaimed.
#
# Prints a table: each state's mean per tool, fastwrite / the peer, and the MiB dirty at the
# start. Every exit status must be 0 and every output must hold the wheel's files. Each state
# starts only once creating files is fast again (lib/common.sh, wait_for_fast_creates): after
# anybody's big delete (a test run's too) it is several times slower for minutes, which swings
# the system time of a run that creates 11,000 files from 1 s to 5 s.
#
# Env: CACHE_RUNS (rounds per state, default 3), PEER (default ripunzip: `ripunzip unzip-file`),
# FASTWRITE, FASTWRITE_BENCH_CACHE. Needs root (drop_caches), GNU time, the peer. Disk: 4 x
# CACHE_RUNS x 2 outputs (42 GB for the torch wheel at 3 rounds), deleted at the end.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock
CORPUS="${1:-torch}"
RUNS="${CACHE_RUNS:-3}"
PEER="${PEER:-ripunzip}"
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
FW="$(resolve_fastwrite "$repo")"
command -v "$PEER" >/dev/null || { echo "cache-states: $PEER is not installed" >&2; exit 1; }
[[ -w /proc/sys/vm/drop_caches ]] || { echo "cache-states: needs root (drop_caches)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "cache-states: needs GNU time (apt-get install time)" >&2; exit 1; }

WHEEL="$("$here/fetch-corpus.sh" "$CORPUS")"
EXPECTED=$(( $(unzip -Z1 "$WHEEL" | grep -vc '/$') - $(unzip -Z "$WHEEL" | grep -c '^l' || true) ))
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/cache-states-$stamp"
ROWS="$CACHE/results/cache-states-$stamp.tsv"
mkdir -p "$WORK" "$CACHE/results"
# Not while file creation is slow after anybody's big delete (a test run's too: see
# lib/common.sh); each state is probed again before it starts.
wait_for_fast_creates "$WORK"

command_for() {  # command_for TOOL OUT
    case "$1" in
    fastwrite) echo "$FW extract $WHEEL -o $2" ;;
    *) echo "$PEER unzip-file $WHEEL -d $2" ;;
    esac
}

dirty_mib() {
    awk '/^(Dirty|Writeback):/ { kb += $2 } END { print int(kb / 1024) }' /proc/meminfo
}

prepare() {  # prepare STATE: the cache as the state wants it, before a run
    case "$1" in
    synced) sync ;;
    dirty) ;;
    dropped) sync; echo 3 >/proc/sys/vm/drop_caches ;;
    filled) sync; BENCH_FILL_FREE_MIB=512 fill_free_memory "$WORK" 2>/dev/null ;;
    esac
}

printf 'state\tround\ttool\twall\tuser\tsys\tdirty_mib\n' >"$ROWS"
for state in synced dirty dropped filled; do
    echo "cache-states: $state" >&2
    wait_for_fast_creates "$WORK"
    # The wheel in the cache for every state but dropped (where prepare drops it).
    cat "$WHEEL" >/dev/null
    for round in $(seq "$RUNS"); do
        order=(fastwrite "$PEER")
        (( round % 2 == 0 )) && order=("$PEER" fastwrite)
        for tool in "${order[@]}"; do
            out="$WORK/$state-$round-$tool"
            mkdir "$out"
            prepare "$state"
            dirty=$(dirty_mib)
            # shellcheck disable=SC2046 # the command's words
            /usr/bin/time -f "%e %U %S" -o "$WORK/time" $(command_for "$tool" "$out") >/dev/null
            n=$(find "$out" -type f | wc -l)
            [[ $n == "$EXPECTED" ]] || { echo "cache-states: VERIFY $out: $n files, expected $EXPECTED" >&2; exit 1; }
            read -r wall user sys <"$WORK/time"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$state" "$round" "$tool" "$wall" "$user" "$sys" "$dirty" >>"$ROWS"
            echo "  $tool: ${wall} s (user $user, sys $sys), $dirty MiB dirty at the start" >&2
        done
    done
done
rm -rf "$WORK"
date +%s >"$SETTLE_MARKER"

python3 - "$ROWS" "$PEER" <<'PY'
import csv, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
peer = sys.argv[2]
by = defaultdict(list)
for r in rows:
    by[(r["state"], r["tool"])].append(r)
mean = lambda rs, k: sum(float(r[k]) for r in rs) / len(rs)
print(f"\n| state | fastwrite | {peer} | fastwrite / {peer} | fastwrite sys | {peer} sys | MiB dirty at start (fw, {peer}) |")
print("|---|---:|---:|---:|---:|---:|---|")
for state in ["synced", "dirty", "dropped", "filled"]:
    fw, pr = by[(state, "fastwrite")], by[(state, peer)]
    print(f"| {state} | {mean(fw, 'wall'):.2f} s | {mean(pr, 'wall'):.2f} s | {mean(fw, 'wall') / mean(pr, 'wall'):.2f} | "
          f"{mean(fw, 'sys'):.2f} s | {mean(pr, 'sys'):.2f} s | {mean(fw, 'dirty_mib'):.0f}, {mean(pr, 'dirty_mib'):.0f} |")
print(f"\nEvery run: {sys.argv[1]}")
PY
