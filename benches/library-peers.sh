#!/usr/bin/env bash
# Usage: benches/library-peers.sh
#
# The library bench: a program writing ~2,300 small files (1-8 KiB, a UFO font's shape, as norad
# writes Roboto-Regular.ufo) four ways, built as benches/library-ways (see its header):
#   std-loop       std::fs::write in a loop
#   rayon-std      rayon + std::fs::write
#   close-already  rayon + close_already's FastClose on its rayon backend (as norad uses it)
#   fastwrite      rayon + fastwrite::Batch::write, then finish (default close policy: auto)
# at each emulated close latency (lab/slowclose.c preloaded, FASTWRITE_LAB_CLOSE_MS; "none" runs
# without the preload), one hyperfine run per latency so the four ways are measured side by
# side. Every run writes into a fresh folder (lib/fresh-dir.sh; nothing deleted during a
# batch), every exit status must be 0, and every output tree is checked afterwards against an
# untimed std-loop run: same file count, same total bytes (and `diff -r` for the untimed pass).
# Without added latency the four are close, and on this machine whichever runs later in a batch
# tends to be slower (the filesystem fills with the batch's files): that batch runs twice, in
# the order above and reversed ("none-rev"), and the table shows both.
#
# Env:
#   LIBRARY_LATENCIES   default "none none-rev 1 5 10" (ms; none: no preload, none-rev: the same
#                       in the reversed order)
#   LIBRARY_FILES       default 2300
#   BENCH_MIN_RUNS      default 3      BENCH_MAX_RUNS  default 10
#   LIBRARY_OLD         a checkout of an earlier fastwrite (say, a `git worktree` of the commit
#                       before a change): its own benches/library-ways is built against it and
#                       timed as a fifth way, fastwrite-old, in every batch, with new / old in
#                       the table
#   FASTWRITE_BENCH_CACHE, BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX: as in zip-peers.sh.
# Output: a table of means and ratios per latency on stdout, hyperfine JSON in the cache.
# Time: ~5 minutes (the std-loop at 10 ms is 23 s a run). Disk: ~10 MB a run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock
unset LD_PRELOAD FASTWRITE_LAB_CLOSE_MS FASTWRITE_LAB_FAIL_CLOSE FASTWRITE_LAB_FAIL_EVERY

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
LATENCIES="${LIBRARY_LATENCIES:-none none-rev 1 5 10}"
FILES="${LIBRARY_FILES:-2300}"
MIN_RUNS="${BENCH_MIN_RUNS:-3}"
MAX_RUNS="${BENCH_MAX_RUNS:-10}"
WAYS=(std-loop rayon-std close-already fastwrite)
command -v hyperfine >/dev/null || { echo "library-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }

# build_ways CHECKOUT NAME: builds CHECKOUT's benches/library-ways (release, its target dir in
# the cache) and prints a copy of the binary named by NAME and its hash, kept in the cache.
build_ways() {
    local target="$CACHE/$2-target" src bin
    echo "library-peers: building $1/benches/library-ways" >&2
    CARGO_TARGET_DIR="$target" cargo build --release --quiet --manifest-path "$1/benches/library-ways/Cargo.toml"
    src="$target/release/library-ways"
    bin="$CACHE/$2-$(sha256sum "$src" | cut -c1-12)"
    [[ -x "$bin" ]] || { cp "$src" "$bin.tmp" && mv "$bin.tmp" "$bin"; }
    echo "$bin"
}
BIN="$(build_ways "$repo" library-ways)"
LAB="$("$repo/lab/build")"
# The binary each way runs, and the way it is told to run.
declare -A WAY_BIN=() WAY_ARG=()
for way in "${WAYS[@]}"; do WAY_BIN[$way]="$BIN" WAY_ARG[$way]="$way"; done
if [[ -n "${LIBRARY_OLD:-}" ]]; then
    OLD_BIN="$(build_ways "$LIBRARY_OLD" library-ways-old)"
    WAYS+=(fastwrite-old)
    WAY_BIN[fastwrite-old]="$OLD_BIN" WAY_ARG[fastwrite-old]=fastwrite
fi

stamp="$(date +%Y%m%d-%H%M%S)"
WORK_ROOT="$CACHE/work/library-$stamp"
mkdir -p "$WORK_ROOT" "$CACHE/results"
trap 'report_failure library-peers "$WORK_ROOT"' EXIT

# Untimed pass, no preload: every way once; their trees must be the same.
mkdir -p "$WORK_ROOT/prepass"
for way in "${WAYS[@]}"; do
    "${WAY_BIN[$way]}" "${WAY_ARG[$way]}" "$WORK_ROOT/prepass/$way" "$FILES"
    diff -r "$WORK_ROOT/prepass/std-loop" "$WORK_ROOT/prepass/$way" >/dev/null ||
        { echo "library-peers: $way wrote another tree than std-loop" >&2; exit 1; }
done
read -r EXPECTED_FILES EXPECTED_BYTES < <(find "$WORK_ROOT/prepass/std-loop" -type f -printf '%s\n' | awk '{ n++; b += $1 } END { print n, b }')

jsons=()
for lat in $LATENCIES; do
    order=("${WAYS[@]}")
    if [[ "$lat" == none* ]]; then
        envw="env -u LD_PRELOAD -u FASTWRITE_LAB_CLOSE_MS"
        if [[ "$lat" == none-rev ]]; then
            order=()
            for ((i = ${#WAYS[@]} - 1; i >= 0; i--)); do order+=("${WAYS[$i]}"); done
        fi
    else
        envw="env $(q "LD_PRELOAD=$LAB") FASTWRITE_LAB_CLOSE_MS=$lat"
        lat="${lat}ms"
    fi
    WORK="$WORK_ROOT/$lat"
    mkdir -p "$WORK"
    json="$CACHE/results/library-$lat-$stamp.json"
    jsons+=("$json")
    args=(-N --min-runs "$MIN_RUNS" --max-runs "$MAX_RUNS" --export-json "$json")
    cmds=()
    for way in "${order[@]}"; do
        args+=(--command-name "$way@$lat" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/$way")")
        cmds+=("$envw $(q "${WAY_BIN[$way]}") ${WAY_ARG[$way]} $(q "$WORK/$way") $FILES")
    done
    wait_for_fast_creates "$WORK_ROOT"
    warn_if_busy
    echo "library-peers: latency $lat: $EXPECTED_FILES files ($EXPECTED_BYTES bytes) per run" >&2
    hyperfine "${args[@]}" "${cmds[@]}"
    for way in "${WAYS[@]}"; do BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$way" --finish; done
    # Every run's tree: the file count and bytes of the untimed pass.
    for way in "${WAYS[@]}"; do
        for run in "$WORK/$way.runs"/*; do
            read -r n b < <(find "$run" -type f -printf '%s\n' | awk '{ n++; b += $1 } END { print n+0, b+0 }')
            if [[ "$n $b" != "$EXPECTED_FILES $EXPECTED_BYTES" ]]; then
                echo "library-peers: VERIFY $way@$lat $run: $n files, $b bytes (expected $EXPECTED_FILES, $EXPECTED_BYTES)" >&2
                exit 1
            fi
        done
    done
done

python3 - "${jsons[@]}" <<'PY'
import json, sys
WAYS = ("std-loop", "rayon-std", "close-already", "fastwrite")
results0 = json.load(open(sys.argv[1]))["results"]
OLD = any(r["command"].startswith("fastwrite-old@") for r in results0)
extra = (" fastwrite-old |", " new / old |") if OLD else ("", "")
print(f"| latency | std-loop | rayon-std | close-already | fastwrite |{extra[0]} fastwrite vs close-already | vs rayon-std | vs fastest other |{extra[1]}")
print("|---|---|---|---|---|" + ("---|" if OLD else "") + "---|---|---|" + ("---|" if OLD else ""))
def row(lat, mean):
    fw = mean["fastwrite"]
    others = min(mean[w] for w in WAYS[:3])
    cells = " | ".join(f"{mean[w]*1000:.0f} ms" for w in WAYS)
    old = f" {mean['fastwrite-old']*1000:.0f} ms |" if OLD else ""
    new_old = f" {fw/mean['fastwrite-old']:.2f} |" if OLD else ""
    print(f"| {lat} | {cells} |{old} {mean['close-already']/fw:.2f}x | {mean['rayon-std']/fw:.2f}x | {others/fw:.2f}x |{new_old}")
no_latency = []
for path in sys.argv[1:]:
    results = json.load(open(path))["results"]
    for r in results:
        if any(c != 0 for c in r.get("exit_codes", [])):
            sys.exit(f"non-zero exit in {r['command']}")
    mean = {r["command"].split("@")[0]: r["mean"] for r in results}
    lat = results[0]["command"].split("@")[1]
    row(lat, mean)
    if lat.startswith("none"):
        no_latency.append(mean)
if len(no_latency) == 2:
    # Each way once first and once last: the order's bias cancels.
    row("none, both orders", {w: sum(m[w] for m in no_latency) / 2 for w in no_latency[0]})
PY
trap - EXIT
cleanup_workdir "$WORK_ROOT"
