#!/usr/bin/env bash
# Usage: benches/slowfs-costs.sh [DELAY_MS]        (default: 2)
#
# Where a file's time goes on a remote filesystem, one cost at a time, on the lab's FUSE
# filesystem (lab/slowfs), extracting the botocore wheel (2,039 files in 923 folders,
# fetch-corpus.sh):
#
# 1. Round trips: each extractor once onto a mount with no delay; the operations the kernel
#    asked of the filesystem (slowfs counts them), per file. A machine-independent measure: on a
#    network filesystem each is a round trip.
# 2. Time: for each kind of operation alone (lookup, create, write, setattr, flush, mkdir) made
#    to wait DELAY_MS, hyperfine times each extractor once into a fresh folder on the mount
#    (lib/fresh-dir.sh), every exit status and every output's file count checked. fastwrite runs
#    its default (writers sized by the run, closes deferred), --no-defer-close, and -j 2 (one
#    writer per core, as before writers were sized); the peers are ripunzip (if installed),
#    unzip and bsdtar.
#
# Env: FASTWRITE (default target/release/fastwrite), FASTWRITE_BENCH_CACHE, SLOWFS_RUNS (default
# 1). Needs root, /dev/fuse, fuse3 and libfuse3-dev (lab/slowfs install), hyperfine, unzip,
# bsdtar. Time: ~8 minutes at 2 ms.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
DELAY="${1:-2}"
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
FW="$(realpath "${FASTWRITE:-$repo/target/release/fastwrite}")"
command -v hyperfine >/dev/null || { echo "slowfs-costs: hyperfine is required" >&2; exit 1; }
"$repo/lab/slowfs" check || { echo "slowfs-costs: needs root, /dev/fuse, fuse3 and libfuse3-dev (lab/slowfs install)" >&2; exit 1; }
[[ -x "$FW" ]] || { echo "slowfs-costs: no fastwrite binary at $FW (cargo build --release)" >&2; exit 1; }

WHEEL="$("$here/fetch-corpus.sh")"
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/slowfs-$stamp"
RESULTS="$CACHE/results/slowfs-$stamp"
mkdir -p "$WORK" "$RESULTS"
EXPECTED=$(unzip -Z1 "$WHEEL" | grep -cv '/$')
mounted=""
cleanup() { [[ -z $mounted ]] || "$repo/lab/slowfs" down "$mounted" >/dev/null || true; }
trap cleanup EXIT

# The extractors, each a command writing into OUT (replaced by its folder).
declare -A cmd=()
order=()
add() { order+=("$1"); cmd[$1]="$2"; }
add "fastwrite" "$(q "$FW") extract $(q "$WHEEL") -o OUT"
add "fastwrite --no-defer-close" "$(q "$FW") --no-defer-close extract $(q "$WHEEL") -o OUT"
add "fastwrite -j 2" "$(q "$FW") -j 2 extract $(q "$WHEEL") -o OUT"
command -v ripunzip >/dev/null && add "ripunzip" "ripunzip unzip-file $(q "$WHEEL") -d OUT"
add "unzip" "unzip -q $(q "$WHEEL") -d OUT"
add "bsdtar" "bsdtar -xf $(q "$WHEEL") -C OUT"
slot() { echo "$1" | tr ' ' '_' | tr -d -- '-'; }
command_into() { local c="${cmd[$1]}"; echo "${c/OUT/$(q "$2")}"; }

check_files() {  # check_files DIR NAME: DIR holds EXPECTED files
    local n
    n=$(find "$1" -type f | wc -l)
    [[ $n == "$EXPECTED" ]] || { echo "slowfs-costs: VERIFY $2: $n files in $1, expected $EXPECTED" >&2; exit 1; }
}

# 1. Round trips per file.
for name in "${order[@]}"; do
    mnt="$WORK/count-$(slot "$name")"
    "$repo/lab/slowfs" up "$mnt" >/dev/null
    mounted="$mnt"
    mkdir "$mnt/out"
    eval "$(command_into "$name" "$mnt/out")" >/dev/null
    "$repo/lab/slowfs" down "$mnt" >"$RESULTS/counts-$(slot "$name").txt"
    mounted=""
    check_files "$mnt.backing/out" "$name"
done

# 2. Time, one cost at a time.
costs=(lookup create write setattr flush mkdir)
for cost in "${costs[@]}"; do
    mnt="$WORK/time-$cost"
    "$repo/lab/slowfs" up "$mnt" "$cost=$DELAY" >/dev/null
    mounted="$mnt"
    args=(-N --runs "${SLOWFS_RUNS:-1}" --export-json "$RESULTS/time-$cost.json")
    for name in "${order[@]}"; do
        s="$mnt/$(slot "$name")"
        args+=(--command-name "$name" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$s")" "$(command_into "$name" "$s")")
    done
    echo "slowfs-costs: $cost waits $DELAY ms" >&2
    BENCH_SYNC=0 hyperfine "${args[@]}" >&2
    for name in "${order[@]}"; do
        s="$mnt/$(slot "$name")"
        BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$s" --finish
        for run in "$s.runs"/*; do check_files "$run" "$name"; done
    done
    "$repo/lab/slowfs" down "$mnt" >/dev/null
    mounted=""
done
trap - EXIT

python3 - "$RESULTS" "$DELAY" "$EXPECTED" "${order[@]}" <<'PY'
import json, sys
results, delay, files, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
slot = lambda n: n.replace(" ", "_").replace("-", "")
ops = ["getattr", "create", "open", "write", "flush", "release", "getxattr", "chmod", "utimens", "mkdir", "total"]
print(f"\n### Operations the kernel asked of the filesystem, per file ({files} files)\n")
print("| command | " + " | ".join(ops) + " |")
print("|---|" + "---:|" * len(ops))
for n in names:
    counts = {l.split()[0]: l.split()[1] for l in open(f"{results}/counts-{slot(n)}.txt")}
    print(f"| {n} | " + " | ".join(f"{int(counts.get(o, 0)) / files:.2f}" for o in ops) + " |")
costs = ["lookup", "create", "write", "setattr", "flush", "mkdir"]
mean = {}
for c in costs:
    for r in json.load(open(f"{results}/time-{c}.json"))["results"]:
        if any(code != 0 for code in r.get("exit_codes", [])):
            sys.exit(f"non-zero exit: {r['command']} with {c} delayed")
        mean[(r["command"], c)] = r["mean"]
print(f"\n### Seconds, with one kind of operation waiting {delay} ms\n")
print("| command | " + " | ".join(costs) + " |")
print("|---|" + "---:|" * len(costs))
for n in names:
    print(f"| {n} | " + " | ".join(f"{mean[(n, c)]:.2f}" for c in costs) + " |")
print()
for c in costs:
    fw = mean[("fastwrite", c)]
    best_peer = min((mean[(n, c)], n) for n in names if not n.startswith("fastwrite"))
    print(f"- {c}: fastwrite / --no-defer-close = {fw / mean[('fastwrite --no-defer-close', c)]:.2f}, "
          f"/ -j 2 = {fw / mean[('fastwrite -j 2', c)]:.2f}, / {best_peer[1]} = {fw / best_peer[0]:.2f}")
PY
