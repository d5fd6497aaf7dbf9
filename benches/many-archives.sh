#!/usr/bin/env bash
# Usage: benches/many-archives.sh [ARCHIVES]
#        benches/many-archives.sh --memory [SOURCES]
#
# Many archives in a bucket, each extracted into a prefix of its own in another bucket
# (docs/many-archives.md), by the ways users have, side by side in one batch: versitygw behind
# lab/s3-proxy.py at DELAY_MS (default 20) one way, ARCHIVES (default 500) archives, tar.gz and
# zip in turn, 10-200 files of 200-4,000 bytes each (seeded: the same every time).
#
#   fastwrite-one  fastwrite extract 's3://src/a/*' --per-archive -o s3://dst/RUN/  (one process)
#   loop           for each archive: fastwrite extract s3://src/a/X -o s3://dst/RUN/X/
#   xargs-8        the same one-archive runs, xargs -P 8
#   get+x+s5cmd    for each archive, xargs -P 8: s5cmd cp it down, unzip or tar it, s5cmd cp
#                  the tree up (how users script it today)
#   s5cmd-tree     s5cmd cp 'TREE/*' s3://dst/RUN/ of the tree already extracted (the uploads
#                  alone: what archive boundaries are measured against)
#   dask           fastwrite.dask.extract_all on a LocalCluster of 2 worker processes (only where
#                  PYTHON has fastwrite and distributed: PYTHON=/path/to/venv/bin/python)
#   rerun          fastwrite-one's command again, into its own prefix: nothing to do
#
# ROUNDS (default 1) rounds, the ways in a rotated order each round, each run into a fresh
# prefix; every exit status checked and every prefix's keys counted (the files, and for a run of
# many its records); the proxy's request counts per run. Prints a table; keeps logs in the work
# folder under ~/.cache/fastwrite-bench.
#
# --memory SOURCES (default 100,000): the peak RSS of a run of many over that many keys listed in
# a bucket (empty objects made in versitygw's folder directly), of which --shard 0/1000 takes
# a thousandth: the memory of holding the listing and the sources, not of extracting.
#
# Needs: versitygw, s5cmd (built with Go by lib/s5cmd.sh if missing), unzip, tar, python3, GNU
# time (fastwrite-one's peak RSS).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
source "$here/lib/common.sh"
source "$here/lib/s5cmd.sh"
# --memory N: only the memory of a run of many over N listed sources (below).
MEMORY=""
if [[ "${1:-}" == --memory ]]; then MEMORY="${2:-100000}"; set -- 0; fi
ARCHIVES="${1:-500}"
DELAY_MS="${DELAY_MS:-20}"
ROUNDS="${ROUNDS:-1}"
CACHE="${BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"

[[ -x /usr/bin/time ]] || { echo "many-archives: GNU time is required (apt-get install -y time)" >&2; exit 1; }
command -v versitygw >/dev/null || { echo "many-archives: versitygw is required (.ci/setup installs it)" >&2; exit 1; }
S5="$(command -v s5cmd || true)"
if [[ -z "$S5" ]]; then build_s5cmd; S5="${S5CMD_INSTALL:-/usr/local/bin/s5cmd}"; fi
FW_SRC="$(resolve_fastwrite "$repo")"
WORK="$(mktemp -d "$CACHE/many-archives.XXXX" 2>/dev/null || { mkdir -p "$CACHE"; mktemp -d "$CACHE/many-archives.XXXX"; })"
FW="$WORK/fastwrite"
cp -- "$FW_SRC" "$FW"
echo "many-archives: $ARCHIVES archives, ${DELAY_MS} ms one way, $ROUNDS round(s); work in $WORK" >&2

# --- the archives, their tree, and the server -------------------------------------------------
if [[ -z "$MEMORY" ]]; then
python3 - "$WORK/archives" "$ARCHIVES" <<'PY'
import io, os, random, sys, tarfile, zipfile
root, count = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
rng = random.Random(7)
for i in range(count):
    files = {f"d{j % 4}/f{j:03d}.bin": rng.randbytes(rng.randint(200, 4000))
             for j in range(rng.randint(10, 200))}
    if i % 2:
        with zipfile.ZipFile(f"{root}/shard-{i:05d}.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in files.items():
                z.writestr(zipfile.ZipInfo(name, (2023, 1, 1, 0, 0, 0)), data)
    else:
        with tarfile.open(f"{root}/shard-{i:05d}.tar.gz", "w:gz") as t:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), 1672531200, 0o644
                t.addfile(info, io.BytesIO(data))
PY
"$FW" extract "$WORK/archives/*" --per-archive -o "$WORK/tree" -q
rm -rf -- "$WORK/tree/.fastwrite"
FILES=$(find "$WORK/tree" -type f | wc -l)
echo "many-archives: $FILES files in $ARCHIVES archives ($(du -sh "$WORK/archives" | cut -f1))" >&2
fi

port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
mkdir -p "$WORK/data"
vport=$(port)
versitygw --access fastwrite --secret fastwrite-secret --port "127.0.0.1:$vport" --keep-alive posix "$WORK/data" >"$WORK/versitygw.log" 2>&1 &
vpid=$!
python3 "$repo/lab/s3-proxy.py" 0 "$vport" --delay-ms "$DELAY_MS" --stats "$WORK/proxy.json" >"$WORK/proxy.out" 2>&1 &
ppid=$!
trap 'kill $vpid $ppid 2>/dev/null || true' EXIT
for _ in $(seq 50); do [[ -s "$WORK/proxy.out" ]] && break; sleep 0.1; done
pport=$(awk '{print $3}' "$WORK/proxy.out")
export AWS_ACCESS_KEY_ID=fastwrite AWS_SECRET_ACCESS_KEY=fastwrite-secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:$pport" S3_ENDPOINT_URL="http://127.0.0.1:$pport"
direct="http://127.0.0.1:$vport"
for b in src dst; do mkdir -p "$WORK/data/$b"; done
if [[ -n "$MEMORY" ]]; then
    # Empty objects, as files in the posix backend's folder (no request each).
    python3 -c 'import os,sys
d=sys.argv[1]; os.makedirs(d)
for i in range(int(sys.argv[2])): open(f"{d}/s-{i:07d}.tar","w").close()' "$WORK/data/src/m" "$MEMORY"
    /usr/bin/time -f %M -o "$WORK/memory.rss" "$FW" extract 's3://src/m/*' --per-archive --shard 0/1000 \
        -o s3://dst/memory/ -q --report "$WORK/memory.jsonl" >/dev/null 2>&1 || true
    lines=$(wc -l <"$WORK/memory.jsonl")
    (( lines > 0 )) || { echo "many-archives: the memory run reported no source" >&2; exit 1; }
    echo "$MEMORY sources listed, $lines taken (--shard 0/1000): peak RSS $(( $(tail -1 "$WORK/memory.rss") / 1024 )) MiB"
    exit 0
fi
"$S5" --endpoint-url "$direct" --log error cp "$WORK/archives/*" s3://src/a/ >/dev/null
requests() {  # every request through the proxy so far (its stats file appears with the first)
    python3 -c 'import json,os,sys;p=sys.argv[1];print(sum(json.load(open(p))["requests"].values()) if os.path.exists(p) else 0)' "$WORK/proxy.json"
}

# --- the ways ---------------------------------------------------------------------------------
ls "$WORK/archives" >"$WORK/names"
stem() { local n="${1%.gz}"; n="${n%.tar}"; echo "${n%.zip}"; }
one_archive() {  # one_archive NAME PREFIX: one fastwrite run of one archive into PREFIX/STEM/
    "$FW" extract "s3://src/a/$1" -o "s3://dst/$2/$(stem "$1")/" -q
}
get_x_s5cmd() {  # get_x_s5cmd NAME PREFIX: down, unpacked, up (its own scratch folder)
    local scratch="$WORK/scratch/$2/$1"
    mkdir -p "$scratch/x"
    "$S5" --log error cp "s3://src/a/$1" "$scratch/" >/dev/null
    case "$1" in
        *.zip) unzip -q "$scratch/$1" -d "$scratch/x" ;;
        *) tar -xzf "$scratch/$1" -C "$scratch/x" ;;
    esac
    "$S5" --log error cp "$scratch/x/*" "s3://dst/$2/$(stem "$1")/" >/dev/null
}
export -f one_archive get_x_s5cmd stem
export FW S5 WORK

run_way() {  # run_way WAY PREFIX
    case "$1" in
        fastwrite-one) /usr/bin/time -f %M -o "$WORK/$2.rss" "$FW" extract 's3://src/a/*' --per-archive -o "s3://dst/$2/" -q ${FW_ARGS:-} ;;
        loop) while read -r n; do one_archive "$n" "$2" || return 1; done <"$WORK/names" ;;
        xargs-8) xargs -P 8 -I{} bash -c 'one_archive "$0" "$1"' {} "$2" <"$WORK/names" ;;
        get+x+s5cmd) xargs -P 8 -I{} bash -c 'get_x_s5cmd "$0" "$1"' {} "$2" <"$WORK/names" ;;
        s5cmd-tree) "$S5" --log error cp "$WORK/tree/*" "s3://dst/$2/" >/dev/null ;;
        dask) "$PYTHON" "$WORK/dask-run.py" "$2" ;;
        rerun) "$FW" extract 's3://src/a/*' --per-archive -o "s3://dst/$2/" -q ;;
    esac
}

# The Dask way's driver: a file, since the workers (spawned processes) import the main module.
cat >"$WORK/dask-run.py" <<'PY'
import sys

import fastwrite.dask
from distributed import Client, LocalCluster

if __name__ == "__main__":
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, silence_logs=50) as cluster, Client(cluster) as client:
        fastwrite.dask.extract_all(client, ["s3://src/a/*"], f"s3://dst/{sys.argv[1]}/")
PY

ways=(fastwrite-one loop xargs-8 get+x+s5cmd s5cmd-tree)
if [[ -n "${PYTHON:-}" ]] && "$PYTHON" -c 'import fastwrite.dask, distributed' 2>/dev/null; then
    ways+=(dask)
else
    echo "many-archives: no dask way (PYTHON=a python with fastwrite and distributed adds it)" >&2
fi
# BENCH_WAYS: only these ways (space-separated), for a look at a few.
if [[ -n "${BENCH_WAYS:-}" ]]; then
    read -r -a ways <<<"$BENCH_WAYS"
fi
printf '%-14s %5s %9s %9s %8s\n' way round seconds keys requests
for round in $(seq "$ROUNDS"); do
    for k in "${!ways[@]}"; do
        way="${ways[$(( (k + round - 1) % ${#ways[@]} ))]}"
        prefix="r$round-$way"
        before=$(requests)
        start=$EPOCHREALTIME
        run_way "$way" "$prefix" >"$WORK/$prefix.log" 2>&1 || { echo "many-archives: $way failed (exit $?): $WORK/$prefix.log" >&2; exit 1; }
        end=$EPOCHREALTIME
        "$S5" --endpoint-url "$direct" ls "s3://dst/$prefix/*" >"$WORK/$prefix.keys"
        keys=$(grep -vc '\.fastwrite/' "$WORK/$prefix.keys" || true)
        records=$(grep -c '\.fastwrite/done/' "$WORK/$prefix.keys" || true)
        (( keys == FILES )) || { echo "many-archives: $way left $keys keys, not $FILES" >&2; exit 1; }
        if [[ $way == fastwrite-one || $way == dask ]] && (( records != ARCHIVES )); then
            echo "many-archives: $way left $records records, not $ARCHIVES" >&2; exit 1
        fi
        rss=""; [[ -f "$WORK/$prefix.rss" ]] && rss="peak RSS $(( $(tail -1 "$WORK/$prefix.rss") / 1024 )) MiB"
        printf '%-14s %5s %9.2f %9s %8s %s\n' "$way" "$round" "$(echo "$end - $start" | bc)" "$keys" $(( $(requests) - before )) "$rss"
        if [[ $way == fastwrite-one ]]; then
            before=$(requests)
            start=$EPOCHREALTIME
            run_way rerun "$prefix" >"$WORK/$prefix-rerun.log" 2>&1 || { echo "many-archives: the rerun failed: $WORK/$prefix-rerun.log" >&2; exit 1; }
            end=$EPOCHREALTIME
            printf '%-14s %5s %9.2f %9s %8s\n' rerun "$round" "$(echo "$end - $start" | bc)" "$keys" $(( $(requests) - before ))
        fi
    done
done
