#!/usr/bin/env bash
# Usage: benches/zip-peers.sh
#
# Times fastwrite against other zip extractors (unzip, bsdtar, 7z, ripunzip)
# on a real ~2000-file wheel (see fetch-corpus.sh) with hyperfine, verifies
# every run's output, and prints each tool's mean time as a ratio to the
# fastest fastwrite variant.
#
# Env:
#   ZIP_CORPUS             botocore (default), scipy (the 35 MB scipy wheel), torch (the 906 MB
#                          torch wheel) or kernel (the kernel tree zipped by Info-ZIP):
#                          fetch-corpus.sh
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite)
#   FASTWRITE_OLD          a second fastwrite binary, timed in the same batch (fastwrite-old)
#   BENCH_LEAN=1           only the best peer (ripunzip, else unzip) and fastwrite: for the
#                          big wheel, whose runs are long
#   BENCH_RUNS             timed runs per command (default 10; plus 1 warmup)
#   FASTWRITE_BENCH_CACHE  corpus, work and results dir (default ~/.cache/fastwrite-bench)
#   BENCH_SYNC=0           don't `sync` between runs (default: sync, untimed)
#   BENCH_SETTLE           seconds to wait after an earlier bench deleted its outputs
#                          (default 370: file creation is slow for up to 6 minutes
#                          after a big delete on this ext4; see lib/common.sh)
#   BENCH_PROBE_MS         then also wait until creating 2000 empty files takes at
#                          most this many ms (default 120; ~40 when healthy) ...
#   BENCH_SETTLE_MAX       ... for at most this many seconds (default 400)
#   BENCH_DROP_CACHES=0    don't drop clean page cache when < 4 GiB is free (default: drop)
#   KEEP_WORK=1            keep the extracted outputs instead of deleting them
#   BENCH_TOOLS, BENCH_RSS=1, BENCH_RESULTS_LOG: only these tools; peak RSS per tool and run;
#                          a log of the results (lib/batch.sh)
#
# Results (markdown + JSON) go to $FASTWRITE_BENCH_CACHE/results/, never the repo.
# Peer tools that are not installed are skipped with a message.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/batch.sh
source "$here/lib/batch.sh"
bench_lock  # one bench at a time on this machine

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
RUNS="${BENCH_RUNS:-10}"
WARMUP=1

command -v hyperfine >/dev/null || { echo "zip-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
FW="$(resolve_fastwrite "$repo")"
WHEEL="$("$here/fetch-corpus.sh" "${ZIP_CORPUS:-botocore}")"
# Entries that are files: neither directories (a name ending in /) nor symlinks (zipinfo's
# long listing starts their line with l; the kernel zip has 56).
EXPECTED_FILES=$(( $(unzip -Z1 "$WHEEL" | grep -vc '/$') - $(unzip -Z "$WHEEL" | grep -c '^l' || true) ))

stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/zip-peers-$stamp"
RESULTS="$CACHE/results"
mkdir -p "$WORK" "$RESULTS"

# Keep failed batches' outputs for inspection; say where they are.
trap 'report_failure zip-peers "$WORK"' EXIT

# --- the contenders -------------------------------------------------------
# Each command extracts into the fixed path $WORK/<name>; lib/batch.sh swaps in a brand-new
# empty dir there before every run, so the timed command is the bare tool with no wrapper.
# Peers first, fastwrite last: hyperfine runs each command's runs back to back, and a batch
# gets slower as it goes (page cache fills, reclaim starts), so this order can only flatter
# the peers.
lean="${BENCH_LEAN:-0}"
add unzip unzip -q "$WHEEL" -d "$WORK/unzip"  # always there: fetch-corpus needs it
if [[ $lean != 1 ]] && have bsdtar; then add bsdtar bsdtar -xf "$WHEEL" -C "$WORK/bsdtar"; fi
if [[ $lean != 1 ]] && have 7z; then add 7z 7z x -y "-o$WORK/7z" "$WHEEL"; fi
if have ripunzip; then add ripunzip ripunzip unzip-file "$WHEEL" -d "$WORK/ripunzip"; fi
if [[ $lean != 1 ]]; then
    add fastwrite-no-defer-close "$FW" --no-defer-close extract "$WHEEL" -o "$WORK/fastwrite-no-defer-close"
fi
if [[ -n "${FASTWRITE_OLD:-}" ]]; then
    add fastwrite-old "$(realpath -- "$FASTWRITE_OLD")" extract "$WHEEL" -o "$WORK/fastwrite-old"
fi
add fastwrite "$FW" extract "$WHEEL" -o "$WORK/fastwrite"

echo "zip-peers: fastwrite = $FW" >&2
run_batch zip-peers "$EXPECTED_FILES" unzip "$WHEEL"

# --- cleanup (only now: deleting during the batch would skew timings) ------
if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    echo "outputs kept in $WORK" >&2
else
    cleanup_workdir "$WORK"
fi
