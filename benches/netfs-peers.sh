#!/usr/bin/env bash
# Usage: benches/netfs-peers.sh [DELAY_MS ...]        (default: 1 5)
#
# fastwrite on a network filesystem for real, against its peers: for each delay, lab/netfs
# mounts sshfs (SFTP over FUSE) through a proxy adding DELAY_MS each way, and hyperfine times,
# each run into a fresh folder on the mount (lib/fresh-dir.sh), every exit status checked and
# every output's file count checked:
#   extract  the botocore wheel (2,039 files, fetch-corpus.sh): fastwrite (default: writers
#            sized by the run), fastwrite -j 2 (one per core, the old default here), -j 16,
#            -j 32, ripunzip (if installed); with NETFS_ALL=1 also unzip and bsdtar (each over a
#            minute a run at 1 ms)
#   mirror   the wheel's tree (unzipped locally once): fastwrite mirror (default), -j 2, -j 16,
#            cp -a; with NETFS_ALL=1 also rsync -a
# and prints a table per delay: each command's mean, the default against the best fixed -j,
# against ripunzip and cp -a, and the mirror against the extraction of the same files.
#
# Env: NETFS_RUNS (default 2 at 1 ms, 1 above), NETFS_ALL=1, FASTWRITE (default
# target/release/fastwrite), FASTWRITE_BENCH_CACHE. Needs root, /dev/fuse, sshfs,
# openssh-server (lab/netfs install), hyperfine. Time: ~6 minutes at 1 ms, ~8 at 5 ms.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
DELAYS=("$@")
((${#DELAYS[@]})) || DELAYS=(1 5)
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
FW="$(realpath "${FASTWRITE:-$repo/target/release/fastwrite}")"
command -v hyperfine >/dev/null || { echo "netfs-peers: hyperfine is required" >&2; exit 1; }
"$repo/lab/netfs" check || { echo "netfs-peers: needs root, /dev/fuse, sshfs and openssh-server (lab/netfs install)" >&2; exit 1; }
[[ -x "$FW" ]] || { echo "netfs-peers: no fastwrite binary at $FW (cargo build --release)" >&2; exit 1; }

WHEEL="$("$here/fetch-corpus.sh")"
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/netfs-$stamp"
mkdir -p "$WORK" "$CACHE/results"
TREE="$WORK/tree"
unzip -q "$WHEEL" -d "$TREE"
EXPECTED=$(find "$TREE" -type f | wc -l)
mounted=()
cleanup() {
    for m in "${mounted[@]}"; do "$repo/lab/netfs" down "$m" || true; done
}
trap cleanup EXIT

slot_of() {  # slot_of COMMAND: the folder a command writes into (its last quoted word)
    local slot
    slot=$(sed -E "s/.*'([^']*)'\/?$/\1/" <<<"$1")
    slot="${slot%/.}"
    echo "${slot%/}"
}

for delay in "${DELAYS[@]}"; do
    mnt="$WORK/mnt-$delay"
    "$repo/lab/netfs" up "$mnt" "$delay" >/dev/null
    mounted+=("$mnt")
    runs="${NETFS_RUNS:-$([[ $delay == 1 ]] && echo 2 || echo 1)}"
    declare -A cmd=()
    order=()
    add() { order+=("$1"); cmd[$1]="$2"; }
    add "fastwrite" "$(q "$FW") extract $(q "$WHEEL") -o $(q "$mnt/fastwrite")"
    for j in 2 16 32; do
        add "fastwrite -j $j" "$(q "$FW") -j $j extract $(q "$WHEEL") -o $(q "$mnt/fastwrite-j$j")"
    done
    command -v ripunzip >/dev/null &&
        add "ripunzip" "ripunzip unzip-file $(q "$WHEEL") -d $(q "$mnt/ripunzip")"
    if [[ "${NETFS_ALL:-}" == 1 ]]; then
        add "unzip" "unzip -q $(q "$WHEEL") -d $(q "$mnt/unzip")"
        add "bsdtar" "bsdtar -xf $(q "$WHEEL") -C $(q "$mnt/bsdtar")"
    fi
    add "mirror fastwrite" "$(q "$FW") mirror $(q "$TREE") $(q "$mnt/mirror-fastwrite")"
    for j in 2 16; do
        add "mirror fastwrite -j $j" "$(q "$FW") -j $j mirror $(q "$TREE") $(q "$mnt/mirror-fastwrite-j$j")"
    done
    # cp -a TREE/. SLOT: the tree's contents directly in the fresh folder, as the others.
    add "mirror cp -a" "cp -a $(q "$TREE/.") $(q "$mnt/mirror-cp")"
    [[ "${NETFS_ALL:-}" == 1 ]] &&
        add "mirror rsync -a" "rsync -a $(q "$TREE/") $(q "$mnt/mirror-rsync/")"
    args=(-N --runs "$runs" --export-json "$CACHE/results/netfs-${delay}ms-$stamp.json")
    for name in "${order[@]}"; do
        slot=$(slot_of "${cmd[$name]}")
        args+=(--command-name "$name" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$slot")" "${cmd[$name]}")
    done
    echo "netfs-peers: sshfs at ${delay} ms each way, $runs run(s) per command" >&2
    BENCH_SYNC=0 hyperfine "${args[@]}" >&2
    for name in "${order[@]}"; do
        slot=$(slot_of "${cmd[$name]}")
        BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$slot" --finish
        count_runs netfs-peers "$slot" "$EXPECTED"
    done
    python3 - "$CACHE/results/netfs-${delay}ms-$stamp.json" "$delay" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
mean = {r["command"]: r["mean"] for r in results}
for r in results:
    if any(c != 0 for c in r.get("exit_codes", [])):
        sys.exit(f"non-zero exit in {r['command']}")
print(f"\n### sshfs, {sys.argv[2]} ms each way\n")
print("| command | mean |")
print("|---|---:|")
for name, m in mean.items():
    print(f"| {name} | {m:.2f} s |")
fw = mean["fastwrite"]
fixed = min(v for k, v in mean.items() if k.startswith("fastwrite -j"))
mfw = mean["mirror fastwrite"]
mfixed = min(v for k, v in mean.items() if k.startswith("mirror fastwrite -j"))
print()
print(f"- extraction: default / best fixed -j = {fw / fixed:.2f}", end="")
if "ripunzip" in mean:
    print(f"; default / ripunzip = {fw / mean['ripunzip']:.2f}", end="")
print()
print(f"- mirror: default / best fixed -j = {mfw / mfixed:.2f}; default / cp -a = {mfw / mean['mirror cp -a']:.2f}; mirror / extraction = {mfw / fw:.2f}")
PY
    "$repo/lab/netfs" down "$mnt"
    unset 'mounted[-1]'
done
trap - EXIT
