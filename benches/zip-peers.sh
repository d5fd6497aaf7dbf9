#!/usr/bin/env bash
# Usage: benches/zip-peers.sh
#
# Times fastwrite against other zip extractors (unzip, bsdtar, 7z, ripunzip)
# on a real ~2000-file wheel (see fetch-corpus.sh) with hyperfine, verifies
# every run's output, and prints each tool's mean time as a ratio to the
# fastest fastwrite variant.
#
# Env:
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite)
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
#
# Results (markdown + JSON) go to $FASTWRITE_BENCH_CACHE/results/, never the repo.
# Peer tools that are not installed are skipped with a message.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock  # one bench at a time on this machine

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
RUNS="${BENCH_RUNS:-10}"
WARMUP=1

command -v hyperfine >/dev/null || { echo "zip-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
FW="$(resolve_fastwrite "$repo")"
WHEEL="$("$here/fetch-corpus.sh")"
EXPECTED_FILES="$(unzip -Z1 "$WHEEL" | grep -vc '/$')"  # entries that are files

stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/zip-peers-$stamp"
RESULTS="$CACHE/results"
mkdir -p "$WORK" "$RESULTS"
MD="$RESULTS/zip-peers-$stamp.md"
JSON="$RESULTS/zip-peers-$stamp.json"

# Keep failed batches' outputs for inspection; say where they are.
trap 'report_failure zip-peers "$WORK"' EXIT

# --- the contenders -------------------------------------------------------
# Each command extracts into the fixed path $WORK/<name>; the per-command
# --prepare (lib/fresh-dir.sh) swaps in a brand-new empty dir there before
# every run, so the timed command is the bare tool with no wrapper.
names=()
cmds=()
add() {  # add NAME CMD...   (CMD words are quoted for hyperfine -N)
    local name="$1" word cmd=""
    shift
    for word in "$@"; do cmd+="${cmd:+ }$(q "$word")"; done
    names+=("$name")
    cmds+=("$cmd")
}
have() {
    if command -v "$1" >/dev/null; then return 0; fi
    echo "zip-peers: $1 not installed; skipping it" >&2
    return 1
}

add fastwrite "$FW" extract "$WHEEL" -o "$WORK/fastwrite"
if "$FW" --help 2>&1 | grep -q -- '--no-defer-close'; then
    add fastwrite-no-defer-close "$FW" --no-defer-close extract "$WHEEL" -o "$WORK/fastwrite-no-defer-close"
else
    echo "zip-peers: $FW has no --no-defer-close flag; skipping that variant" >&2
fi
add unzip unzip -q "$WHEEL" -d "$WORK/unzip"  # always there: fetch-corpus needs it
if have bsdtar; then add bsdtar bsdtar -xf "$WHEEL" -C "$WORK/bsdtar"; fi
if have 7z; then add 7z 7z x -y "-o$WORK/7z" "$WHEEL"; fi
if have ripunzip; then add ripunzip ripunzip unzip-file "$WHEEL" -d "$WORK/ripunzip"; fi

# --- the batch ------------------------------------------------------------
wait_for_fast_creates "$WORK"  # first waits out our own recent deletes
free_memory_for_batch "$WHEEL"
warn_if_busy

args=(-N --warmup "$WARMUP" --runs "$RUNS" --export-markdown "$MD" --export-json "$JSON")
for i in "${!names[@]}"; do
    args+=(--command-name "${names[$i]}" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/${names[$i]}")")
done
echo "zip-peers: $WHEEL ($EXPECTED_FILES files), $RUNS runs + $WARMUP warmup each" >&2
echo "zip-peers: fastwrite = $FW" >&2
# No -i: hyperfine aborts (and so does this script) if any run exits non-zero.
hyperfine "${args[@]}" "${cmds[@]}"
# Same probe again: if it is now slow, something deleted files during the batch.
after_ms="$(probe_creates "$WORK/.probe/after")"
echo "zip-peers: file-creation probe after the batch: ${after_ms} ms for 2000 files" >&2
if (( after_ms > ${BENCH_PROBE_MS:-120} )); then
    echo "zip-peers: WARNING: file creation got slow during the batch (files deleted elsewhere?); treat these timings with suspicion" >&2
fi

# --- verify every run's output --------------------------------------------
bad=0
for name in "${names[@]}"; do
    BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$name" --finish  # park the last run's output
    dirs=("$WORK/$name.runs"/*)
    if (( ${#dirs[@]} != RUNS + WARMUP )); then
        echo "zip-peers: VERIFY $name: ${#dirs[@]} output dirs, expected $((RUNS + WARMUP))" >&2
        bad=1
    fi
    for d in "${dirs[@]}"; do
        got="$(find "$d" -type f | wc -l)"
        if (( got != EXPECTED_FILES )); then
            echo "zip-peers: VERIFY $name: $d has $got files, expected $EXPECTED_FILES" >&2
            bad=1
        fi
    done
    # Content check on one run per tool, against unzip's output.
    if [[ "$name" != unzip ]] && ! diff -rq "$WORK/unzip.runs/1" "${dirs[0]}" >/dev/null; then
        echo "zip-peers: VERIFY $name: extracted content differs from unzip's" >&2
        bad=1
    fi
done
# hyperfine already refuses non-zero exits; double-check from its JSON.
python3 - "$JSON" <<'PY' || bad=1
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    codes = r.get("exit_codes", [])
    if any(c != 0 for c in codes):
        print(f"zip-peers: VERIFY {r['command']}: non-zero exit codes {codes}", file=sys.stderr)
        sys.exit(1)
PY
if (( bad )); then
    echo "zip-peers: verification FAILED" >&2
    exit 1
fi
echo "zip-peers: verified $(( ${#names[@]} * (RUNS + WARMUP) )) output dirs: $EXPECTED_FILES files each, all exits 0" >&2

# --- report ----------------------------------------------------------------
echo
echo "Ratios vs fastest fastwrite variant (mean time / fastwrite mean; >1 = slower than fastwrite)"
python3 - "$JSON" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
fw = min((r for r in res if r["command"].startswith("fastwrite")), key=lambda r: r["mean"])
print(f"{'tool':<26} {'mean ms':>9} {'± ms':>7} {'ratio':>7}")
for r in sorted(res, key=lambda r: r["mean"]):
    print(f"{r['command']:<26} {r['mean']*1e3:9.1f} {r['stddev']*1e3:7.1f} {r['mean']/fw['mean']:7.2f}")
print(f"(baseline: {fw['command']})")
PY
echo
echo "results: $MD"
echo "         $JSON"

# --- cleanup (only now: deleting during the batch would skew timings) ------
if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    echo "outputs kept in $WORK" >&2
else
    cleanup_workdir "$WORK"
fi
