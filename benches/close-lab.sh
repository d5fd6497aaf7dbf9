#!/usr/bin/env bash
# Usage: benches/close-lab.sh [small-zip small-tar big-zip big-tar ...]   (default: all four)
#
# The close-latency lab bench: how fastwrite's close modes behave when closing a written file is
# slow (Windows Defender, NFS, FUSE), emulated on Linux with lab/slowclose.c (an LD_PRELOAD
# library: FASTWRITE_LAB_CLOSE_MS=N makes every close of a file opened for writing wait N ms).
#
# Corpora are GENERATED (lib/gen-corpus.py, deterministic, made once into the cache):
#   small  2,000 files of 1-8 KiB in 50 dirs (9.3 MB), as corpus.zip and corpus.tar
#   big    8 files of 32 MiB (256 MiB), as corpus.zip and corpus.tar
# One hyperfine batch per corpus and format, so that everything in a batch is measured side by
# side in one run: every close mode (CLOSE_LAB_MODES: never = --no-defer-close, always, auto)
# at every emulated close latency (CLOSE_LAB_LATENCIES ms, with the preload library), plus every
# mode WITHOUT the preload ("none": the true baseline). The zip batches also run
# benches/close-already-baseline (built here with cargo): the zip crate + rayon + std File
# writes, closing through close_already's FastClose ("close_already") or by a plain drop
# ("plain drop"). hyperfine picks the runs per command between BENCH_MIN_RUNS and
# BENCH_MAX_RUNS (~3 s of runs each: 3 runs for the slow inline cases, up to 10 for the fast).
#
# As in the other benches: every timed run writes into a fresh, never-used folder (lib/fresh-dir.sh
# as --prepare; nothing is deleted during a batch), every exit status must be 0, and every
# output tree is checked afterwards: its file count and total bytes against the corpus manifest,
# and the first run's content against the generated tree (diff -r). One untimed pass of every
# tool (no preload) before each batch warms the caches and checks the tools work.
#
# Output: JSON + a markdown report (times and ratio tables, target checks) per batch in
# $FASTWRITE_BENCH_CACHE/results/close-lab-*, and the chart docs/close-latency.png (time vs
# emulated latency, one line per mode, one panel per batch; drawn by lib/chart.py from these
# JSON files, with matplotlib in a venv the script makes in the cache).
#
# Env:
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite); the bench runs a
#                          copy of it (in the cache), so a rebuild during the bench changes nothing
#   CLOSE_LAB_MODES        default "never always auto" (auto is dropped when the binary's --help
#                          has no --defer-close; then never = --no-defer-close, always = default)
#   CLOSE_LAB_LATENCIES    emulated close latencies in ms (default "0 1 5 10")
#   CLOSE_LAB_BASELINE=0   leave out the close_already / plain-drop rows
#   CLOSE_LAB_CHART        PNG to write (default docs/close-latency.png; empty: no chart)
#   BENCH_MIN_RUNS         default 3      BENCH_MAX_RUNS  default 10 (big: BENCH_BIG_MAX_RUNS, 5)
#   BENCH_WARMUP           hyperfine warmup runs per command (default 0: the untimed pass warms)
#   FASTWRITE_BENCH_CACHE, BENCH_SYNC, BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX,
#   BENCH_DROP_CACHES, KEEP_WORK=1: as in zip-peers.sh.
#   BENCH_FILL_MEMORY=0    don't fill free memory with clean page cache before the big batches
#                          (see mirror-peers.sh; then BENCH_DROP_CACHES applies as for small)
# Time: ~10 minutes with the defaults (most of it the inline runs at 5 and 10 ms: 2,000 closes
# x 10 ms over 2 writers = 10 s a run), plus any wait for an earlier bench's deletes.
# Disk: the small batches keep ~300,000 small files until the end; a big batch keeps up to
# (runs x commands x 256 MiB), ~32 GB, until it ends (checked before it starts).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock  # one bench at a time on this machine
t_start="$(date +%s)"

# The lab's variables must reach only the commands that are meant to have them.
unset LD_PRELOAD FASTWRITE_LAB_CLOSE_MS FASTWRITE_LAB_FAIL_CLOSE FASTWRITE_LAB_FAIL_EVERY

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
MODES="${CLOSE_LAB_MODES:-never always auto}"
LATENCIES="${CLOSE_LAB_LATENCIES:-0 1 5 10}"
MIN_RUNS="${BENCH_MIN_RUNS:-3}"
MAX_RUNS="${BENCH_MAX_RUNS:-10}"
BIG_MAX_RUNS="${BENCH_BIG_MAX_RUNS:-5}"
WARMUP="${BENCH_WARMUP:-0}"
CHART="${CLOSE_LAB_CHART-$repo/docs/close-latency.png}"
RESULTS="$CACHE/results"
LABDIR="$CACHE/close-lab"
batches=("$@")
(( ${#batches[@]} )) || batches=(small-zip small-tar big-zip big-tar)

command -v hyperfine >/dev/null || { echo "close-lab: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }
mkdir -p "$RESULTS" "$LABDIR/bin"

# --- the binaries ---------------------------------------------------------------------------
# A copy of fastwrite, named by its hash: others may rebuild target/release during the bench.
FW_SRC="$(resolve_fastwrite "$repo")"
fw_hash="$(sha256sum "$FW_SRC" | cut -c1-12)"
FW="$LABDIR/bin/fastwrite-$fw_hash"
[[ -x "$FW" ]] || { cp "$FW_SRC" "$FW.tmp" && mv "$FW.tmp" "$FW"; }
LAB="$("$repo/lab/build")"
fw_desc="$("$FW" --version) (sha256 $fw_hash; repo at $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
echo "close-lab: fastwrite = $FW_SRC: $fw_desc" >&2
echo "close-lab: preload   = $LAB" >&2

# Close modes -> fastwrite arguments. Before --defer-close existed, the default was "always".
declare -A MODE_ARGS
if "$FW" --help 2>&1 | grep -q -- '--defer-close'; then
    MODE_ARGS=([never]="--defer-close never" [always]="--defer-close always" [auto]="--defer-close auto")
else
    MODE_ARGS=([never]="--no-defer-close" [always]="")
    if [[ " $MODES " == *" auto "* ]]; then
        echo "close-lab: this fastwrite has no --defer-close: leaving out the auto mode" >&2
        MODES="$(tr ' ' '\n' <<<"$MODES" | grep -vx auto | tr '\n' ' ')"
    fi
fi
for m in $MODES; do
    [[ -v "MODE_ARGS[$m]" ]] || { echo "close-lab: unknown close mode '$m' (never, always, auto)" >&2; exit 2; }
done
echo "close-lab: modes: $MODES; latencies: none (no preload) $LATENCIES ms" >&2

BASELINE=""
if [[ "${CLOSE_LAB_BASELINE:-1}" != 0 ]]; then
    echo "close-lab: building benches/close-already-baseline (cargo, target dir in the cache)" >&2
    CARGO_TARGET_DIR="$CACHE/close-already-baseline-target" \
        cargo build --release --quiet --manifest-path "$here/close-already-baseline/Cargo.toml"
    BASELINE="$CACHE/close-already-baseline-target/release/close-already-baseline"
fi

# --- the corpora ----------------------------------------------------------------------------
corpus() {  # corpus small|big: makes it once, prints its dir
    local dir="$LABDIR/$1"
    if [[ ! -e "$dir/done" ]]; then
        # A half-made corpus from an interrupted run: its deletion stamps the settle marker.
        [[ -e "$dir.part" ]] && cleanup_workdir "$dir.part"
        echo "close-lab: generating the $1 corpus (once) into $dir" >&2
        python3 "$here/lib/gen-corpus.py" "$1" "$dir.part"
        sync
        [[ -e "$dir" ]] && cleanup_workdir "$dir"
        mv "$dir.part" "$dir"
        touch "$dir/done"
    fi
    echo "$dir"
}

stamp="$(date +%Y%m%d-%H%M%S)"
WORK_ROOT="$CACHE/work/close-lab-$stamp"
mkdir -p "$WORK_ROOT"
trap 'report_failure close-lab "$WORK_ROOT"' EXIT
jsons=()

for batch in "${batches[@]}"; do
    case "$batch" in
        small-zip | small-tar | big-zip | big-tar) ;;
        *) echo "close-lab: unknown batch '$batch' (small-zip small-tar big-zip big-tar)" >&2; exit 2 ;;
    esac
    kind="${batch%-*}" fmt="${batch#*-}"
    CORPUS="$(corpus "$kind")"
    ARCHIVE="$CORPUS/corpus.$fmt"
    read -r EXPECTED_FILES EXPECTED_BYTES <"$CORPUS/manifest"
    WORK="$WORK_ROOT/$batch"
    mkdir -p "$WORK"
    max_runs="$MAX_RUNS"
    [[ "$kind" == big ]] && max_runs="$BIG_MAX_RUNS"

    # The tools: NAME -> the command that extracts ARCHIVE into the dir given as its last word.
    tools=()
    declare -A TOOL_CMD=()
    for m in $MODES; do
        tools+=("fw-$m")
        # shellcheck disable=SC2206  # MODE_ARGS words are meant to split
        TOOL_CMD["fw-$m"]="$(q "$FW") ${MODE_ARGS[$m]} extract $(q "$ARCHIVE") -o"
    done
    if [[ -n "$BASELINE" && "$fmt" == zip ]]; then
        tools+=(ca-fastclose ca-plain)
        TOOL_CMD[ca-fastclose]="$(q "$BASELINE") fast-close $(q "$ARCHIVE")"
        TOOL_CMD[ca-plain]="$(q "$BASELINE") plain $(q "$ARCHIVE")"
    fi

    # Untimed pass: every tool once, no preload; warms the caches, checks the tool works.
    mkdir -p "$WORK/prepass"
    for t in "${tools[@]}"; do
        eval "${TOOL_CMD[$t]} $(q "$WORK/prepass/$t")" >/dev/null
        if ! diff -rq "$CORPUS/tree" "$WORK/prepass/$t" >/dev/null; then
            echo "close-lab: $batch: $t's output differs from the generated tree" >&2
            exit 1
        fi
    done

    # The commands: every latency (none = no preload), every tool. `env` runs every one of them,
    # so they all pay the same one extra exec.
    names=() cmds=()
    for lat in none $LATENCIES; do
        if [[ "$lat" == none ]]; then
            envw="env -u LD_PRELOAD -u FASTWRITE_LAB_CLOSE_MS"
        else
            envw="env $(q "LD_PRELOAD=$LAB") FASTWRITE_LAB_CLOSE_MS=$lat"
            lat="${lat}ms"
        fi
        for t in "${tools[@]}"; do
            names+=("$t@$lat")
            cmds+=("$envw ${TOOL_CMD[$t]} $(q "$WORK/$t@$lat")")
        done
    done

    if [[ "$kind" == big ]]; then
        need_kb=$(( EXPECTED_BYTES * (max_runs + WARMUP) * ${#names[@]} / 1024 + 2 * 1024 * 1024 ))
        avail_kb="$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')"
        if (( avail_kb < need_kb )); then
            echo "close-lab: $batch needs $((need_kb >> 20)) GiB of disk, only $((avail_kb >> 20)) GiB free (lower BENCH_BIG_MAX_RUNS or CLOSE_LAB_LATENCIES)" >&2
            exit 1
        fi
    fi

    json="$RESULTS/close-lab-$batch-$stamp.json"
    args=(-N --warmup "$WARMUP" --min-runs "$MIN_RUNS" --max-runs "$max_runs" --export-json "$json")
    for i in "${!names[@]}"; do
        args+=(--command-name "${names[$i]}" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/${names[$i]}")")
    done
    wait_for_fast_creates "$WORK_ROOT"
    if [[ "$kind" == big && "${BENCH_FILL_MEMORY:-1}" == 1 ]]; then
        # A big batch writes ~20 GB: without this, whichever runs get long-free memory are the
        # slow ones (lib/common.sh, fill_free_memory; seen here: 0.16-0.83 s for the same run).
        fill_free_memory "$WORK_ROOT"
    else
        free_memory_for_batch "$ARCHIVE"
    fi
    warn_if_busy
    echo "close-lab: $batch: $EXPECTED_FILES files ($EXPECTED_BYTES bytes) per run, ${#names[@]} commands, $MIN_RUNS-$max_runs runs each" >&2
    # No -i: hyperfine stops (and so does the script) if any run exits non-zero.
    hyperfine "${args[@]}" "${cmds[@]}"
    after_ms="$(probe_creates "$WORK_ROOT/.probe/after-$batch")"
    if (( after_ms > ${BENCH_PROBE_MS:-120} )); then
        echo "close-lab: $batch: WARNING: file creation got slow during the batch (${after_ms} ms per 2000 files)" >&2
    fi

    # --- verify: run dirs per command, file count and bytes of every tree, content of one --
    for n in "${names[@]}"; do BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$n" --finish; done
    python3 - "$json" "$WORK" "$EXPECTED_FILES" "$EXPECTED_BYTES" "$WARMUP" <<'PY'
import json, os, sys
path, work, files, size, warmup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
bad = 0
trees = 0
for r in json.load(open(path))["results"]:
    name = r["command"]
    codes = r.get("exit_codes", [])
    if any(c != 0 for c in codes):
        print(f"VERIFY {name}: non-zero exit codes {codes}", file=sys.stderr); bad = 1
    runs = os.path.join(work, name + ".runs")
    dirs = sorted(os.listdir(runs), key=int)
    if len(dirs) != len(r["times"]) + warmup:
        print(f"VERIFY {name}: {len(dirs)} output dirs, expected {len(r['times']) + warmup}", file=sys.stderr); bad = 1
    for d in dirs:
        n = b = 0
        for root, _, fs in os.walk(os.path.join(runs, d)):
            for f in fs:
                st = os.lstat(os.path.join(root, f))
                n += 1
                b += st.st_size
        trees += 1
        if (n, b) != (files, size):
            print(f"VERIFY {name}: run {d}: {n} files, {b} bytes; expected {files}, {size}", file=sys.stderr); bad = 1
print(f"verified {trees} output trees: {files} files, {size} bytes each; all exits 0" if not bad else "verification FAILED", file=sys.stderr)
sys.exit(bad)
PY
    for n in "${names[@]}"; do
        if ! diff -rq "$CORPUS/tree" "$WORK/$n.runs/1" >/dev/null; then
            echo "close-lab: $batch: VERIFY $n: content of run 1 differs from the generated tree" >&2
            exit 1
        fi
    done
    echo "close-lab: $batch: content of every command's first run = the generated tree" >&2

    md="${json%.json}.md"
    python3 "$here/lib/close-lab-report.py" --batch "$batch" --files "$EXPECTED_FILES" \
        --fastwrite "$fw_desc" "$json" | tee "$md"
    echo "results: $md"
    echo "         $json"
    jsons+=("$json")

    # Big batches: few inodes (runs x commands x 8 files), so their outputs can go now without
    # slowing later file creation (see mirror-peers.sh); the small ones stay until the end.
    if [[ "$kind" == big && "${KEEP_WORK:-0}" != 1 ]]; then
        rm -rf -- "$WORK"
        sync
    fi
done

# --- the chart --------------------------------------------------------------------------------
if [[ -n "$CHART" ]]; then
    VENV="$CACHE/venv-chart"
    if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
        echo "close-lab: installing matplotlib into $VENV (once)" >&2
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet matplotlib
    fi
    "$VENV/bin/python" "$here/lib/chart.py" --out "$CHART" --title "fastwrite $fw_hash, $(date +%Y-%m-%d)" "${jsons[@]}"
    echo "chart: $CHART"
fi

# --- cleanup (only now: deleting during a batch would skew its timings) ---------------------
if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    echo "outputs kept in $WORK_ROOT" >&2
else
    cleanup_workdir "$WORK_ROOT"
fi
echo "close-lab: done in $(( $(date +%s) - t_start )) s" >&2
