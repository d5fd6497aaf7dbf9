#!/usr/bin/env bash
# Usage: benches/python-peers.sh [FS ...]      (default: local slowfs-1 slowfs-5 netfs-1)
#
# The Python package against what a Python program does without it, side by side in one
# hyperfine batch per filesystem and task, one process per run (interpreter start included, the
# same for every way), each run into a fresh folder (lib/fresh-dir.sh; nothing deleted during a
# batch), every exit status checked and every output's files counted (benches/lib/py-ways.py
# has the ways):
#   wheel   the botocore wheel (2,039 files, fetch-corpus.sh): fastwrite.extract,
#           zipfile.extractall, shutil.unpack_archive; the trees compared once (names and sizes)
#   ufo     3,366 small files (a UFO font's shape, 1-8 KiB) from one Python thread:
#           fastwrite.Batch.write, Batch.open, a plain open/write loop, ThreadPoolExecutor(32)
#   kernel  (local only, with PY_KERNEL=1) Debian's linux-source-6.1 .tar.gz (fetch-linux.sh,
#           ~78,000 files, 1.3 GB): fastwrite.extract, tarfile.extractall(filter="data"),
#           shutil.unpack_archive(filter="data"); the page cache as the runs leave it
# on each FS:
#   local     this machine's disk (the bench cache's folder)
#   slowfs-N  the lab's FUSE filesystem (lab/slowfs) with N ms in every FLUSH (each close)
#   netfs-N   sshfs through the lab's delaying proxy, N ms each way (lab/netfs)
# Prints a markdown table per FS: each way's mean and its time over fastwrite's.
#
# Env: PY_RUNS (default 3 local, 2 elsewhere), PY_KERNEL=1, PY_TASKS (default "wheel ufo"),
# FASTWRITE_BENCH_CACHE. The package is built from this checkout into a virtual environment in
# the cache (pip install ./python, release build). Needs hyperfine; the mounts need root,
# /dev/fuse, fuse3 (lab/slowfs install), sshfs and openssh-server (lab/netfs install).
# Time: ~3 minutes local, ~3 on slowfs-1, ~6 on slowfs-5, ~8 on netfs-1; the kernel ~6 more.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock
FSES=("$@")
((${#FSES[@]})) || FSES=(local slowfs-1 slowfs-5 netfs-1)
read -r -a TASKS <<<"${PY_TASKS:-wheel ufo}"
[[ "${PY_KERNEL:-}" == 1 ]] && TASKS+=(kernel)
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
command -v hyperfine >/dev/null || { echo "python-peers: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }

VENV="$CACHE/python-venv"
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
echo "python-peers: building the package into $VENV" >&2
"$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$repo/python"
PY="$VENV/bin/python"
WAYS="$here/lib/py-ways.py"
WHEEL="$("$here/fetch-corpus.sh")"
UFO_FILES=3366
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/python-$stamp"
mkdir -p "$WORK" "$CACHE/results"
mounted=()
cleanup() {
    for m in "${mounted[@]}"; do
        case "$m" in
        *slowfs*) "$repo/lab/slowfs" down "$m" >/dev/null || true ;;
        *) "$repo/lab/netfs" down "$m" >/dev/null || true ;;
        esac
    done
}
trap cleanup EXIT

# same_tree A B: the same names and sizes (content is the readers' business: each way's own
# checks, CRCs included, ran).
same_tree() {
    diff <(cd "$1" && find . -type f -printf '%p %s\n' | sort) <(cd "$2" && find . -type f -printf '%p %s\n' | sort) >/dev/null ||
        { echo "python-peers: VERIFY $1 and $2 differ" >&2; exit 1; }
}

# bench FS TASK BASE RUNS SYNC: one hyperfine batch of TASK's ways writing under BASE.
bench() {
    local fs="$1" task="$2" base="$3" runs="$4" sync="$5" what expected name slot
    local -a ways args
    case "$task" in
    wheel) what="$WHEEL"; ways=(fastwrite zipfile shutil) ;;
    kernel) what="$CACHE/linux/linux.tar.gz"; ways=(fastwrite tarfile shutil) ;;
    ufo) what="$UFO_FILES"; ways=(batch batch-open loop threads32) ;;
    esac
    case "$task" in
    ufo) expected="$UFO_FILES" ;;
    *) expected="" ;;
    esac
    local json="$CACHE/results/python-$fs-$task-$stamp.json"
    args=(-N --runs "$runs" --export-json "$json")
    for name in "${ways[@]}"; do
        slot="$base/$task-$name"
        args+=(--command-name "$name" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$slot")"
            "$(q "$PY") $(q "$WAYS") $name $(q "$what") $(q "$slot")")
    done
    echo "python-peers: $task on $fs, $runs run(s) per way" >&2
    BENCH_SYNC="$sync" hyperfine "${args[@]}" >&2
    for name in "${ways[@]}"; do
        BENCH_SYNC="$sync" "$here/lib/fresh-dir.sh" "$base/$task-$name" --finish
    done
    if [[ -z "$expected" ]]; then
        expected=$(find "$base/$task-${ways[1]}.runs/1" -type f | wc -l)
        same_tree "$base/$task-${ways[0]}.runs/1" "$base/$task-${ways[1]}.runs/1"
    fi
    for name in "${ways[@]}"; do count_runs python-peers "$base/$task-$name" "$expected"; done
    "$PY" - "$json" "$fs" "$task" "$expected" <<'PY'
import json, sys
path, fs, task, files = sys.argv[1:]
results = json.load(open(path))["results"]
for r in results:
    if any(c != 0 for c in r.get("exit_codes", [])):
        sys.exit(f"python-peers: non-zero exit in {r['command']}")
base = results[0]["mean"]
print(f"\n### {task} on {fs} ({files} files)\n")
print(f"| way | mean | / {results[0]['command']} |")
print("|---|---:|---:|")
for r in results:
    print(f"| {r['command']} | {r['mean']:.3f} s ± {r['stddev'] or 0:.3f} | {r['mean'] / base:.1f}x |")
PY
}

for fs in "${FSES[@]}"; do
    case "$fs" in
    local)
        base="$WORK/local"; mkdir -p "$base"; runs="${PY_RUNS:-3}"; sync=1 ;;
    slowfs-*)
        base="$WORK/mnt-$fs"
        "$repo/lab/slowfs" up "$base" "flush=${fs#slowfs-}" >/dev/null
        mounted+=("$base"); runs="${PY_RUNS:-2}"; sync=0 ;;
    netfs-*)
        base="$WORK/mnt-$fs"
        "$repo/lab/netfs" up "$base" "${fs#netfs-}" >/dev/null
        mounted+=("$base"); runs="${PY_RUNS:-2}"; sync=0 ;;
    *) echo "python-peers: unknown FS $fs" >&2; exit 2 ;;
    esac
    for task in "${TASKS[@]}"; do
        [[ $task == kernel && $fs != local ]] && continue
        [[ $task == kernel ]] && "$here/fetch-linux.sh" >/dev/null
        bench "$fs" "$task" "$base" "$runs" "$sync"
    done
done
