#!/usr/bin/env bash
# Usage: benches/s3.sh [-n N] [DELAY_MS|direct ...]          (default: -n 3, delays 0 5 20)
#        benches/s3.sh --store azure [-n N] [DELAY_MS|direct ...] (into Azure Blob Storage)
#        benches/s3.sh --sync [-n N] [DELAY_MS|direct ...]   (a mirror with nothing to do)
#        benches/s3.sh --download [-n N] [DELAY_MS|direct ...] (a prefix down into a folder)
#        benches/s3.sh --store gcs --download [-n N] [DELAY_MS|direct ...] (out of Google Cloud
#                      Storage: fake-gcs-server takes none of fastwrite's uploads, so GCS is
#                      benched in the direction it serves)
#        benches/s3.sh --memory [COUNT]                       (fastwrite's RSS; default 80000)
#
# Extracting an archive into a bucket: fastwrite against the ways users do it today, on the
# same S3 server (--store azure: into a container of Azurite, Azure Blob Storage's emulator,
# 3.35.0 from /opt/azurite as .ci/setup installs it, in memory; against rclone's azureblob
# backend, its default 4 transfers and 64, the Azure tools that build here; the copy only). The server is versitygw on its posix backend over a fresh folder, started as
# tests/common/s3.rs starts it (a free loopback port, --keep-alive); in front of it, for each
# DELAY_MS, lab/s3-proxy.py holds every chunk DELAY_MS in each direction (a request's round
# trip is 2 x DELAY_MS; 0 still goes through the proxy, so every delay takes the same path and
# every request is counted; `direct` instead of a delay: no proxy, the clients talk to the
# server itself, and the requests are not counted: the proxy is Python and spends a core's
# worth of CPU at 0 ms, beside the client and the server on 2 cores). The corpus is the botocore wheel
# (fetch-corpus.sh: 2,039 files, 21 MB out), into the bucket `bench`:
#   fastwrite    fastwrite extract WHEEL -o s3://bench/RUN/
#   unzip+s5cmd  unzip -q WHEEL -d DIR && s5cmd cp 'DIR/*' s3://bench/RUN/  (how users do it
#                today; DIR is a new folder each run, never deleted during the bench)
#   s5cmd        s5cmd cp 'TREE/*' s3://bench/RUN/  (TREE: the wheel unzipped once, untimed)
#   rclone       rclone copy TREE B:bench/RUN       (rclone's defaults: 4 transfers)
#   rclone-t64   rclone copy --transfers 64 TREE B:bench/RUN
#   aws          aws s3 cp --recursive TREE s3://bench/RUN/
# Run only when BENCH_TOOLS names them:
#   fastwrite-mirror     fastwrite mirror TREE s3://bench/RUN/  (a fresh mirror into a bucket,
#                        against s5cmd's cp of the same tree: BENCH_TOOLS='fastwrite-mirror s5cmd')
#   fastwrite-uploads-N  fastwrite extract WHEEL -o s3://bench/RUN/ --uploads N, N one of 8, 32,
#                        128, 256 (fixed uploads in flight against the default, which the run
#                        sizes itself: BENCH_TOOLS='fastwrite fastwrite-uploads-8 ...')
#   fastwrite-markers    fastwrite extract WHEEL -o s3://bench/RUN/ --folder-markers (a marker
#                        for each of the wheel's folders besides its files; the run then holds
#                        the files and one `dir/` key per folder: BENCH_TOOLS='fastwrite
#                        fastwrite-markers')
#   fastwrite-base       with FASTWRITE_BASE=BINARY: that build's extract (with --download: its mirror down), to set a change beside
#                        the build before it (BENCH_TOOLS='fastwrite fastwrite-base')
# Each quiet (s5cmd --log error, aws --only-show-errors; the others print no line per file).
# N rounds per delay; within a round every tool runs once, round-robin, each round starting
# one tool further on, so no tool has its runs in a row. Every run writes into a fresh prefix
# (RUN = DELAYms/rROUND/TOOL; nothing is deleted during the bench), under `timeout`. A run
# counts only if its exit status is 0 and the prefix then holds exactly the wheel's files:
# 2,039 keys, each name and size as in TREE (a listing straight from the server, untimed);
# otherwise it is reported as FAILED and left out of the medians. Between runs: `sync`.
#
# Measured per run: wall time (bash's EPOCHREALTIME around the client); the client's CPU, user
# + system of the client process and every child it waited for, from GNU time (/usr/bin/time
# -f; for unzip+s5cmd the two together); the requests by method (the proxy's --stats); and the
# CPU time the server and the proxy spent meanwhile (/proc/PID/stat): on 2 cores they compete
# with the client. Printed per delay: a table of medians of the good runs, with the ratios to
# fastwrite's (above 1: slower than fastwrite), and the client CPU per object; then the user
# metadata each tool stored on one object (HeadObject), to see which tools keep the mtime.
#
# --sync: a mirror with nothing to do. Untimed, first: each tool copies TREE into its own prefix
# itself (straight to the server), with the very command then timed; each run is that command
# again, TREE unchanged, through the proxy, N rounds per delay, round-robin as above:
#   fastwrite    fastwrite mirror TREE s3://bench/sync/fastwrite/
#   s5cmd        s5cmd sync TREE/ s3://bench/sync/s5cmd/  (s5cmd's default: a file is copied if
#                its size differs or it is newer than the object, by the listing's LastModified)
#   rclone       rclone sync TREE B:bench/sync/rclone  (its defaults: size and modtime, the
#                modtime being rclone's own X-Amz-Meta-Mtime, read with a HEAD per object;
#                --use-server-modtime or --size-only would spare those HEADs: not run here)
#   aws          aws s3 sync TREE s3://bench/sync/aws/  (size, and a file newer than its object)
# A run counts only if it exits 0, the proxy counted no PUT, POST or DELETE during it, and the
# prefix then holds exactly TREE's files, each object's LastModified and ETag as after the
# setup (so at `direct`, where nothing is counted, the listing still shows a rewrite). Printed:
# the same tables (per object = per file compared), and the metadata the setup stored.
# Time: -n 3 at 0 and 20 ms took ~2.3 minutes here (the setup ~25 s, the aws CLI most of it;
# then rclone's HEADs, 13 s a run at 20 ms), plus any wait for an earlier bench's deletes.
#
# --download: a prefix of 2,039 objects downloaded into a folder. Untimed, first: fastwrite
# uploads TREE, straight to the server, with `fastwrite mirror TREE s3://bench/down` (each
# object with the file's mtime and mode as user metadata; the prefix must then hold exactly
# TREE's files). Each run then downloads the prefix through the proxy into a fresh local folder
# (OUT = WORK/down/DELAYms-rROUND-TOOL, never deleted during the bench), N rounds per delay,
# round-robin as above:
#   fastwrite    fastwrite mirror s3://bench/down/ OUT
#   s5cmd        s5cmd cp 's3://bench/down/*' OUT/      (its default workers: 256)
#   rclone       rclone copy B:bench/down OUT           (rclone's defaults: 4 transfers)
#   rclone-t64   rclone copy --transfers 64 B:bench/down OUT
#   aws          aws s3 sync s3://bench/down/ OUT --only-show-errors
# --store gcs --download: the same out of a bucket of fake-gcs-server (v1.56.1, as .ci/setup
# builds it; in memory, loopback, plain HTTP), uploaded once by `rclone copy --transfers 64 TREE
# B:bench/down` with rclone's `google cloud storage` backend (which stores `mtime` and
# `goog-reserved-file-mtime`, no mode), against rclone's downloads alone (s5cmd and the aws CLI
# speak S3 only; gsutil is not built here): fastwrite mirror gs://bench/down/ OUT, reaching the
# proxy through STORAGE_EMULATOR_HOST as Google's libraries do.
# A run counts only if it exits 0 and OUT then holds exactly TREE's files (names and sizes of
# regular files, nothing else but folders). Recorded too, not failed: how many files got back
# TREE's mtime (to the second) and its permission bits. Printed: the same tables (per object =
# per file downloaded), and per tool the mtimes and modes its good runs restored.
# Time: -n 3 at 0 and 20 ms took ~4.2 minutes here (the setup 1.3 s; the aws CLI 11-16 s a run
# at any delay, its CPU; rclone's 4 transfers 24 s a run at 20 ms), plus any wait for an
# earlier bench's deletes. Disk: 21 MB a run (~1 GB at N=3 and two delays) until the end.
#
# --memory [COUNT]: fastwrite's memory with many keys, straight to the server (no proxy), once
# each: a tar of COUNT files of 200 bytes in folders of 1,000 (made once with python3's
# tarfile, cached as $FASTWRITE_BENCH_CACHE/s3-small-COUNTx200.tar, and untarred once beside
# it, s3-small-COUNTx200/, also kept), then
#   extract      fastwrite extract --stats THE.tar -o s3://bench/mem-extract/
#   mirror       fastwrite mirror --stats THE_TREE s3://bench/mem-mirror/   (a fresh prefix)
#   mirror-noop  the same mirror again: nothing to do
# each under GNU time -v (maximum resident set size: fastwrite's, the largest process GNU time
# waited for). A run counts only if it exits 0, the prefix then holds exactly the tar's files
# with their sizes (s5cmd ls, all pages), and one object's user metadata (HeadObject of
# d000/f000.txt) has the file's mtime and mode; mirror-noop also only if --stats says every file
# was unchanged and no object's LastModified or ETag changed. Printed: wall time, max RSS,
# client CPU, keys, the requests fastwrite counted (--stats) and the server's CPU. Time: at
# 80,000, ~65 s for the three runs here (the server creates 160,000 files), ~3 minutes in all
# with making the tar and the tree the first time, the listings and the cleanup, plus any wait
# for an earlier bench's deletes; disk: ~1 GB in the work folder until the end, and the tar
# (82 MB) and its tree (80,000 files) stay in the cache.
#
# Env:
#   BENCH_TOOLS            only these tools (names as above, space-separated)
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite; built with
#                          `cargo build --release` when it is missing or has no s3:// output).
#                          The bench runs a copy of it (in the cache), so a rebuild during the
#                          bench changes nothing
#   S5CMD                  s5cmd binary (default: s5cmd in PATH; if there is none, s5cmd
#                          v2.3.0 is built with Go into S5CMD_INSTALL, default
#                          /usr/local/bin/s5cmd: 18 s here the first time, fetching its
#                          dependencies from the Go module proxy; 5 s with Go's caches warm)
#   VERSITYGW              the server (default: versitygw in PATH; v1.8.0 in .ci/setup)
#   S3_BENCH_TIMEOUT       seconds a run may take before it is killed, and FAILED (default 600;
#                          1800 with --memory)
#   BENCH_PROXY            python (default: lab/s3-proxy.py, which counts the requests) or
#                          compiled (lab/delay-proxy.go, built once with Go into the cache: the
#                          same delay without Python's cost per connection and per chunk, which
#                          weighs on a client of many connections; requests not counted)
#   FASTWRITE_BENCH_CACHE, BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX, BENCH_DROP_CACHES,
#   KEEP_WORK=1, BOTOCORE_VERSION: as in zip-peers.sh and fetch-corpus.sh.
# Needs: versitygw, rclone, the aws CLI, unzip, s5cmd (or Go, to build it once; --memory lists
# with it), python3, GNU time, GNU tar (--memory),
# a filesystem with user extended attributes under the cache (versitygw's posix backend).
# Time: a round took ~45 s at 0 ms and ~95 s at 20 ms here (rclone's 4 transfers, 48 s at
# 20 ms, and the aws CLI are most of it): about 10 minutes at N=3 and the default delays, plus
# any wait for an earlier bench's deletes.
# Disk: every run's objects stay (21 MB, 2,039 files each) until the end: ~1.2 GB at N=3.
#
# Results (markdown + the raw runs as TSV) go to $FASTWRITE_BENCH_CACHE/results/s3-* (s3-sync-*,
# s3-download-*, s3-memory-*), never the repo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"

RUNS=3 RUNS_SET=0 MODE=copy STORE=s3
usage="usage: benches/s3.sh [--sync|--download] [-n N] [DELAY_MS|direct ...], or benches/s3.sh --memory [COUNT]"
set_mode() {
    [[ "$MODE" == copy || "$MODE" == "$1" ]] || { echo "s3: --sync, --download and --memory are three benches: one at a time" >&2; exit 2; }
    MODE="$1"
}
while (( $# )); do
    case "$1" in
    --sync) set_mode sync; shift ;;
    --download) set_mode download; shift ;;
    --memory) set_mode memory; shift ;;
    --store) STORE="${2:?--store needs s3, azure or gcs}"; shift 2 ;;
    -n | --runs) RUNS="${2:?-n needs a number}"; RUNS_SET=1; shift 2 ;;
    -n*) RUNS="${1#-n}"; RUNS_SET=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "s3: unknown option $1 ($usage)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "s3: -n wants a positive number, not '$RUNS'" >&2; exit 2; }
[[ "$STORE" == s3 || "$STORE" == azure || "$STORE" == gcs ]] || { echo "s3: --store is s3, azure or gcs, not '$STORE'" >&2; exit 2; }
[[ "$STORE" != azure || "$MODE" == copy ]] || { echo "s3: --store azure benches the copy only (no --sync, --download, --memory)" >&2; exit 2; }
[[ "$STORE" != gcs || "$MODE" == download ]] || { echo "s3: --store gcs benches --download only (fake-gcs-server takes none of fastwrite's uploads)" >&2; exit 2; }
SCHEME=s3
[[ "$STORE" == azure ]] && SCHEME=az
[[ "$STORE" == gcs ]] && SCHEME=gs
AZURITE=/opt/azurite/bin/azurite-blob
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='  # Azurite's, public
if [[ "$MODE" == memory ]]; then
    (( ! RUNS_SET )) || { echo "s3: --memory runs each command once: no -n" >&2; exit 2; }
    (( $# <= 1 )) || { echo "s3: --memory takes one COUNT ($usage)" >&2; exit 2; }
    COUNT="${1:-80000}"
    [[ "$COUNT" =~ ^[1-9][0-9]*$ ]] || { echo "s3: --memory wants a positive number of files, not '$COUNT'" >&2; exit 2; }
    RUNS=1 DELAYS=(direct)
else
    DELAYS=("$@")
    ((${#DELAYS[@]})) || DELAYS=(0 5 20)
fi
for d in "${DELAYS[@]}"; do
    [[ "$d" =~ ^[0-9]+$ || "$d" == direct ]] || { echo "s3: a delay is whole milliseconds or 'direct', not '$d'" >&2; exit 2; }
done

bench_lock  # one bench at a time on this machine
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
TIMEOUT="${S3_BENCH_TIMEOUT:-$([[ "$MODE" == memory ]] && echo 1800 || echo 600)}"
ASKED_TOOLS=()
case "$MODE" in
copy) ALL_TOOLS=(fastwrite unzip+s5cmd s5cmd rclone rclone-t64 aws)
    [[ "$STORE" == azure ]] && ALL_TOOLS=(fastwrite rclone rclone-t64)
    # Run only when named in BENCH_TOOLS.
    ASKED_TOOLS=(fastwrite-mirror fastwrite-markers fastwrite-uploads-8 fastwrite-uploads-32 fastwrite-uploads-128
        fastwrite-uploads-256 ${FASTWRITE_BASE:+fastwrite-base}) ;;
sync) ALL_TOOLS=(fastwrite s5cmd rclone aws) ;;
download) ALL_TOOLS=(fastwrite s5cmd rclone rclone-t64 aws)
    [[ "$STORE" == gcs ]] && ALL_TOOLS=(fastwrite rclone rclone-t64)
    ASKED_TOOLS=(${FASTWRITE_BASE:+fastwrite-base}) ;;
memory) ALL_TOOLS=(fastwrite) ;;
esac
TOOLS=()
for t in "${ALL_TOOLS[@]}"; do
    if [[ -z "${BENCH_TOOLS:-}" || " $BENCH_TOOLS " == *" $t "* ]]; then TOOLS+=("$t"); fi
done
for t in "${ASKED_TOOLS[@]}"; do
    if [[ " ${BENCH_TOOLS:-} " == *" $t "* ]]; then TOOLS+=("$t"); fi
done
for t in ${BENCH_TOOLS:-}; do
    [[ " ${ALL_TOOLS[*]} ${ASKED_TOOLS[*]} " == *" $t "* ]] ||
        { echo "s3: unknown tool '$t' in BENCH_TOOLS (${ALL_TOOLS[*]} ${ASKED_TOOLS[*]})" >&2; exit 2; }
done
((${#TOOLS[@]})) || { echo "s3: no tools (BENCH_TOOLS='${BENCH_TOOLS:-}')" >&2; exit 2; }
wants() { [[ " ${TOOLS[*]} " == *" $1 "* ]]; }

# --- the tools --------------------------------------------------------------------------------
need() { command -v "$1" >/dev/null || { echo "s3: $1 is required ($2)" >&2; exit 1; }; }
[[ -x /usr/bin/time ]] || { echo "s3: GNU time (/usr/bin/time) is required (apt-get install -y time)" >&2; exit 1; }
need python3 "python3"
[[ "$MODE" == memory ]] || need unzip "apt-get install -y unzip"
need curl "apt-get install -y curl"
if [[ "$STORE" == s3 ]]; then
    need aws "the aws CLI lists what each run stored: pip install awscli"
    VGW="${VERSITYGW:-$(command -v versitygw || true)}"
    [[ -x "$VGW" ]] || { echo "s3: versitygw is required (GOBIN=/usr/local/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0, as .ci/setup does)" >&2; exit 1; }
elif [[ "$STORE" == azure ]]; then
    [[ -x "$AZURITE" ]] || { echo "s3: Azurite is required at $AZURITE (npm install -g --prefix /opt/azurite azurite@3.35.0, as .ci/setup does)" >&2; exit 1; }
    need rclone "apt-get install -y rclone: it makes the container"
else
    need fake-gcs-server "GOBIN=/usr/local/bin go install github.com/fsouza/fake-gcs-server@v1.56.1, as .ci/setup does"
    need rclone "apt-get install -y rclone: it uploads what every run downloads"
fi
if wants rclone || wants rclone-t64; then need rclone "apt-get install -y rclone"; fi

# s5cmd v2.3.0, built once from the Go module proxy when there is none (lib/s5cmd.sh).
source "$repo/benches/lib/s5cmd.sh"
S5=""
if wants s5cmd || wants unzip+s5cmd || [[ "$MODE" == memory ]]; then  # --memory lists with it
    S5="${S5CMD:-$(command -v s5cmd || true)}"
    if [[ -z "$S5" ]]; then
        build_s5cmd
        S5="${S5CMD_INSTALL:-/usr/local/bin/s5cmd}"
    fi
    [[ -x "$S5" ]] || { echo "s3: no s5cmd at $S5" >&2; exit 1; }
fi

# fastwrite: the release binary, built only if it is missing or predates s3:// outputs (another
# engineer may be compiling: a binary that works is reused), then run from a copy. --download
# needs it for its setup even when it is not among the tools.
FW=""
if [[ " ${TOOLS[*]} " == *" fastwrite"* || "$MODE" == download ]]; then
    FW_SRC="${FASTWRITE:-$repo/target/release/fastwrite}"
    if [[ -z "${FASTWRITE:-}" ]] && { [[ ! -x "$FW_SRC" ]] || ! "$FW_SRC" extract --help 2>&1 | grep -q 's3://'; }; then
        echo "s3: $FW_SRC is missing or has no s3:// output: cargo build --release" >&2
        (cd "$repo" && cargo build --release)
    fi
    FW_SRC="$(resolve_fastwrite "$repo")"
    "$FW_SRC" extract --help 2>&1 | grep -q 's3://' ||
        { echo "s3: $FW_SRC cannot extract into a bucket (no s3:// in its help): rebuild it" >&2; exit 1; }
    if [[ "$MODE" != copy ]] && ! "$FW_SRC" mirror --help 2>&1 | grep -q 's3://'; then
        echo "s3: $FW_SRC cannot mirror into a bucket (no s3:// in its mirror help): rebuild it" >&2; exit 1
    fi
    fw_hash="$(sha256sum "$FW_SRC" | cut -c1-12)"
    mkdir -p "$CACHE/bin"
    FW="$CACHE/bin/fastwrite-$fw_hash"
    [[ -x "$FW" ]] || { cp -- "$FW_SRC" "$FW.tmp" && mv -- "$FW.tmp" "$FW"; }
fi
# fastwrite-base: another build of fastwrite (before a change), run from a copy as FW is.
FW_BASE=""
if wants fastwrite-base; then
    base_hash="$(sha256sum "$FASTWRITE_BASE" | cut -c1-12)"
    FW_BASE="$CACHE/bin/fastwrite-$base_hash"
    [[ -x "$FW_BASE" ]] || { cp -- "$FASTWRITE_BASE" "$FW_BASE.tmp" && mv -- "$FW_BASE.tmp" "$FW_BASE"; }
fi

# BENCH_PROXY=compiled: lab/delay-proxy.go (Go, standard library only), built once into the cache.
DELAY_PROXY=""
if [[ "${BENCH_PROXY:-python}" == compiled ]]; then
    go="$(command -v go || echo /usr/local/go/bin/go)"
    [[ -x "$go" ]] || { echo "s3: BENCH_PROXY=compiled builds lab/delay-proxy.go with Go, and there is none" >&2; exit 1; }
    DELAY_PROXY="$CACHE/bin/delay-proxy-$(sha256sum "$repo/lab/delay-proxy.go" | cut -c1-12)"
    mkdir -p "$CACHE/bin"
    [[ -x "$DELAY_PROXY" ]] || "$go" build -o "$DELAY_PROXY" "$repo/lab/delay-proxy.go"
elif [[ "${BENCH_PROXY:-python}" != python ]]; then
    echo "s3: BENCH_PROXY is python or compiled, not '$BENCH_PROXY'" >&2; exit 2
fi

# --- the corpus -------------------------------------------------------------------------------
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/s3-$stamp"
RESULTS="$CACHE/results"
mkdir -p "$WORK/root" "$WORK/unzip" "$WORK/logs" "$WORK/lists" "$RESULTS"
name="s3-$stamp"
[[ "$STORE" == azure ]] && name="s3-azure-$stamp"
[[ "$MODE" == copy ]] || name="s3-$MODE-$stamp"
[[ "$STORE" == gcs ]] && name="s3-gcs-$MODE-$stamp"
TSV="$RESULTS/$name.tsv"
MD="$RESULTS/$name.md"
if [[ "$MODE" == memory ]]; then
    # COUNT files of 200 bytes, d000/f000.txt ... in folders of 1,000, mtime 1700000000, mode
    # 0644 (folders 0755), made once; and untarred once beside it (GNU tar, as root: modes and
    # mtimes kept), for the mirrors.
    SMALL_SIZE=200
    TAR="$CACHE/s3-small-${COUNT}x$SMALL_SIZE.tar"
    SMALL="${TAR%.tar}"
    if [[ ! -s "$TAR" ]]; then
        echo "s3: making $TAR ($COUNT files of $SMALL_SIZE bytes), once" >&2
        python3 - "$TAR.tmp" "$COUNT" "$SMALL_SIZE" <<'PY'
import io, sys, tarfile
path, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with tarfile.open(path, "w") as tar:
    for d in range((count + 999) // 1000):
        t = tarfile.TarInfo(f"d{d:03d}")
        t.type, t.mode, t.mtime = tarfile.DIRTYPE, 0o755, 1700000000
        tar.addfile(t)
        for i in range(d * 1000, min(count, d * 1000 + 1000)):
            data = (f"file {i:07d} ".encode() * (size // 13 + 1))[:size - 1] + b"\n"
            t = tarfile.TarInfo(f"d{d:03d}/f{i % 1000:03d}.txt")
            t.size, t.mode, t.mtime = len(data), 0o644, 1700000000
            tar.addfile(t, io.BytesIO(data))
PY
        mv -- "$TAR.tmp" "$TAR"
    fi
    if [[ ! -d "$SMALL" ]]; then
        echo "s3: untarring it into $SMALL, once" >&2
        rm -rf -- "$SMALL.tmp"
        mkdir -p -- "$SMALL.tmp"
        tar -xf "$TAR" -C "$SMALL.tmp"
        mv -- "$SMALL.tmp" "$SMALL"
    fi
    # The objects a run must leave: the tar's files, with their sizes; and the tree must hold
    # exactly those (which also brings its inodes into memory, for both mirrors alike).
    python3 - "$TAR" <<'PY' | LC_ALL=C sort >"$WORK/manifest.tsv"
import sys, tarfile
for m in tarfile.open(sys.argv[1]):
    if m.isfile():
        print(f"{m.name}\t{m.size}")
PY
    (cd "$SMALL" && find . -type f -printf '%P\t%s\n' | LC_ALL=C sort) >"$WORK/tree-manifest.tsv"
    cmp -s "$WORK/manifest.tsv" "$WORK/tree-manifest.tsv" ||
        { echo "s3: $SMALL does not hold the tar's files (delete it to untar again)" >&2; exit 1; }
    EXPECTED=$(wc -l <"$WORK/manifest.tsv")
    (( EXPECTED == COUNT )) || { echo "s3: $TAR has $EXPECTED files, not $COUNT (delete it to make it again)" >&2; exit 1; }
else
    WHEEL="$("$here/fetch-corpus.sh")"
    TREE="$WORK/tree"
    unzip -q "$WHEEL" -d "$TREE"
    # The objects a run must leave: every file of the tree, with its size (the wheel has no
    # symlinks, and folders make no objects).
    (cd "$TREE" && find . -type f -printf '%P\t%s\n' | LC_ALL=C sort) >"$WORK/manifest.tsv"
    EXPECTED=$(wc -l <"$WORK/manifest.tsv")
    in_zip=$(unzip -Z1 "$WHEEL" | grep -vc '/$')
    (( EXPECTED == in_zip )) || { echo "s3: the tree has $EXPECTED files, the wheel $in_zip" >&2; exit 1; }
fi

# --- the server -------------------------------------------------------------------------------
ACCESS=fastwrite SECRET=fastwrite-secret REGION=us-east-1 BUCKET=bench
SERVER_PID="" PROXY_PID="" SPORT=""
on_exit() {
    local rc=$?
    [[ -n "$PROXY_PID" ]] && { kill "$PROXY_PID" 2>/dev/null || true; wait "$PROXY_PID" 2>/dev/null || true; }
    [[ -n "$SERVER_PID" ]] && { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
    if (( rc != 0 )); then echo "s3: failed (exit $rc); outputs and logs kept in $WORK" >&2; fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# No AWS or rclone settings of this machine's (a profile, a session token, AWS_CA_BUNDLE, which
# rclone 1.60 refuses: "unable to load custom CA bundle"), no config files; versitygw gets no
# VGW_* or ROOT_* of ours either.
while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(AWS_|RCLONE_|VGW_|ROOT_|S3_ENDPOINT_URL$)' || true)
export AWS_ACCESS_KEY_ID="$ACCESS" AWS_SECRET_ACCESS_KEY="$SECRET" AWS_REGION="$REGION" \
    AWS_DEFAULT_REGION="$REGION" AWS_ALLOW_HTTP=true AWS_EC2_METADATA_DISABLED=true \
    AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER=""
export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_B_TYPE=s3 RCLONE_CONFIG_B_PROVIDER=Other \
    RCLONE_CONFIG_B_ACCESS_KEY_ID="$ACCESS" RCLONE_CONFIG_B_SECRET_ACCESS_KEY="$SECRET" \
    RCLONE_CONFIG_B_REGION="$REGION"

# Where the clients go (a proxy, or the server itself): their settings for ENDPOINT.
point_at() {  # point_at ENDPOINT
    if [[ "$STORE" == azure ]]; then
        export AZURE_STORAGE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=$AZ_ACCOUNT;AccountKey=$AZ_KEY;BlobEndpoint=$1/$AZ_ACCOUNT;"
        export RCLONE_CONFIG_B_ENDPOINT="$1/$AZ_ACCOUNT"
    elif [[ "$STORE" == gcs ]]; then
        export STORAGE_EMULATOR_HOST="${1#http://}" RCLONE_CONFIG_B_ENDPOINT="$1/storage/v1/"
    else
        export AWS_ENDPOINT_URL="$1" RCLONE_CONFIG_B_ENDPOINT="$1"
    fi
}

# Azurite, as tests/common/s3.rs starts it: in memory, loopback, no telemetry; a container
# readable by anyone, so that each run's blobs are listed without a client of ours.
if [[ "$STORE" == azure ]]; then
    while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^AZURE' || true)
    export RCLONE_CONFIG_B_TYPE=azureblob RCLONE_CONFIG_B_USE_EMULATOR=true \
        RCLONE_CONFIG_B_ACCOUNT="$AZ_ACCOUNT" RCLONE_CONFIG_B_KEY="$AZ_KEY"
    unset RCLONE_CONFIG_B_PROVIDER RCLONE_CONFIG_B_ACCESS_KEY_ID RCLONE_CONFIG_B_SECRET_ACCESS_KEY RCLONE_CONFIG_B_REGION
    # Started afresh (in memory, empty) before every run, on the same port, behind the same
    # proxy: Azurite's in-memory store slows as it fills (measured: 2.7 s, then 7.3 s, then
    # 19.6 s for the same fastwrite run as 2,039 blobs a run piled up), which would time the
    # emulator rather than the tools.
    start_azurite() {  # start_azurite: on SPORT (a free one if empty); sets SERVER_PID
        local port_given="$SPORT"
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            [[ -n "$port_given" ]] || SPORT="$(free_port)"
            (cd "$WORK" && exec "$AZURITE" --disableTelemetry --inMemoryPersistence --silent \
                --blobHost 127.0.0.1 --blobPort "$SPORT" </dev/null >"$WORK/server.log" 2>&1) &
            SERVER_PID=$!
            for _ in $(seq 300); do
                if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
                if curl -sI "http://127.0.0.1:$SPORT/" 2>/dev/null | grep -qi '^server: azurite'; then
                    DIRECT="http://127.0.0.1:$SPORT"
                    RCLONE_CONFIG_B_ENDPOINT="$DIRECT/$AZ_ACCOUNT" rclone mkdir \
                        --azureblob-public-access container "B:$BUCKET"
                    return 0
                fi
                sleep 0.1
            done
            kill "$SERVER_PID" 2>/dev/null || true
            wait "$SERVER_PID" 2>/dev/null || true
            SERVER_PID=""
            sleep 0.5  # the same port, once its last owner let go
        done
        echo "s3: Azurite did not start:" >&2; cat "$WORK/server.log" >&2; exit 1
    }
    fresh_azurite() {
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
        start_azurite
    }
    start_azurite
    point_at "$DIRECT"
fi

# fake-gcs-server, as tests/common/s3.rs starts it: in memory, loopback, plain HTTP, its public
# host without a port (it serves `/BUCKET/OBJECT`, the XML API's paths, only to requests for
# that host, and through the proxy the port is the proxy's); rclone's `google cloud storage`
# backend, anonymous, at its JSON API.
if [[ "$STORE" == gcs ]]; then
    while read -r v; do unset "$v"; done < <(compgen -e | grep -E '^(GOOGLE_|STORAGE_EMULATOR_HOST$)' || true)
    export RCLONE_CONFIG_B_TYPE="google cloud storage" RCLONE_CONFIG_B_ANONYMOUS=true
    unset RCLONE_CONFIG_B_PROVIDER RCLONE_CONFIG_B_ACCESS_KEY_ID RCLONE_CONFIG_B_SECRET_ACCESS_KEY RCLONE_CONFIG_B_REGION
    for _ in 1 2 3 4 5; do
        SPORT="$(free_port)"
        fake-gcs-server -scheme http -host 127.0.0.1 -port "$SPORT" -backend memory \
            -log-level error -public-host 127.0.0.1 </dev/null >"$WORK/server.log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 300); do
            if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
            if curl -sf "http://127.0.0.1:$SPORT/storage/v1/b" 2>/dev/null | grep -q 'storage#buckets'; then break 2; fi
            sleep 0.1
        done
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    done
    [[ -n "$SERVER_PID" ]] || { echo "s3: fake-gcs-server did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }
    DIRECT="http://127.0.0.1:$SPORT"
    curl -sf -X POST "$DIRECT/storage/v1/b" -H 'content-type: application/json' \
        -d "{\"name\": \"$BUCKET\"}" >/dev/null
fi

# The server, as tests/common/s3.rs starts it: a free port is found by binding port 0 and
# letting it go, so another process may take it first; then the next one is tried.
for _ in 1 2 3 4 5; do
    [[ "$STORE" == s3 ]] || break
    SPORT="$(free_port)"
    "$VGW" --port "127.0.0.1:$SPORT" --access "$ACCESS" --secret "$SECRET" --region "$REGION" \
        --keep-alive --quiet --health /health posix "$WORK/root" </dev/null >"$WORK/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 300); do  # 30 s; it takes some 30 ms
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
        if curl -sf "http://127.0.0.1:$SPORT/health" 2>/dev/null | grep -q .; then break 2; fi
        sleep 0.1
    done
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    grep -q "address already in use" "$WORK/server.log" || { echo "s3: versitygw did not start:" >&2; cat "$WORK/server.log" >&2; exit 1; }
done
[[ -n "$SERVER_PID" ]] || { echo "s3: versitygw found no free port in 5 tries" >&2; exit 1; }
DIRECT="http://127.0.0.1:$SPORT"
aws_direct() { aws --endpoint-url "$DIRECT" "$@"; }
[[ "$STORE" != s3 ]] || aws_direct s3api create-bucket --bucket "$BUCKET" --output json >/dev/null

# CPU seconds (user + system) a process has used so far.
TICKS="$(getconf CLK_TCK)"
cpu_of() {  # cpu_of PID (none: 0)
    if [[ -z "$1" ]]; then echo 0; return; fi
    awk -v t="$TICKS" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"
}

if [[ "$STORE" == gcs ]]; then
    versions="fake-gcs-server $(go version -m "$(command -v fake-gcs-server)" 2>/dev/null | awk '$1 == "mod" { print $3 }' || true)"
elif [[ "$STORE" == azure ]]; then
    versions="Azurite $(sed -n 's/.*"version": "\(.*\)".*/\1/p' /opt/azurite/lib/node_modules/azurite/package.json | head -n 1)"
else
    versions="versitygw $(go version -m "$VGW" 2>/dev/null | awk '$1 == "mod" { print $3 }' || true)"
fi
[[ -n "$FW" ]] && versions+=", fastwrite $("$FW" --version | awk '{ print $2 }') (sha256 $fw_hash; repo at $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
[[ -n "$S5" ]] && versions+=", s5cmd $("$S5" version)"
if wants rclone || wants rclone-t64; then versions+=", $(rclone version | sed -n 1p)"; fi  # sed reads it all: no SIGPIPE
[[ "$STORE" != s3 ]] || versions+=", $(aws --version 2>&1 | cut -d' ' -f1)"
echo "s3: $versions" >&2
case "$MODE" in
copy) echo "s3: server $DIRECT ($([[ "$STORE" == azure ]] && echo "Azurite, in memory, afresh each run" || echo "posix root $WORK/root")); $EXPECTED files per run; $RUNS round(s) at ${DELAYS[*]} ms" >&2 ;;
sync) echo "s3: server $DIRECT (posix root $WORK/root); syncs of $EXPECTED unchanged files; $RUNS round(s) at ${DELAYS[*]} ms" >&2 ;;
download) echo "s3: server $DIRECT ($([[ "$STORE" == gcs ]] && echo "fake-gcs-server, in memory" || echo "posix root $WORK/root")); downloads of $EXPECTED objects into a folder; $RUNS round(s) at ${DELAYS[*]} ms" >&2 ;;
memory) echo "s3: server $DIRECT (posix root $WORK/root); $EXPECTED files of $SMALL_SIZE bytes, straight to the server" >&2 ;;
esac

# --- one run ----------------------------------------------------------------------------------
# The command a tool runs (into CMD): the copy, with --sync the sync (the setup's and every
# run's alike), with --download the download of s3://bench/down/ into WORK/down/ID.
tool_cmd() {  # tool_cmd TOOL ENDPOINT PREFIX ID
    local tool="$1" ep="$2" prefix="$3" id="$4"
    if [[ "$MODE" == download ]]; then
        local out="$WORK/down/$id"
        case "$tool" in
        fastwrite) CMD=("$FW" mirror "$SCHEME://$BUCKET/down/" "$out") ;;
        fastwrite-base) CMD=("$FW_BASE" mirror "$SCHEME://$BUCKET/down/" "$out") ;;
        s5cmd) CMD=("$S5" --endpoint-url "$ep" --log error cp "s3://$BUCKET/down/*" "$out/") ;;
        rclone) CMD=(rclone copy "B:$BUCKET/down" "$out") ;;
        rclone-t64) CMD=(rclone copy --transfers 64 "B:$BUCKET/down" "$out") ;;
        aws) CMD=(aws s3 sync --only-show-errors "s3://$BUCKET/down/" "$out") ;;
        esac
        return
    fi
    if [[ "$MODE" == sync ]]; then
        case "$tool" in
        fastwrite) CMD=("$FW" mirror "$TREE" "s3://$BUCKET/$prefix/") ;;
        s5cmd) CMD=("$S5" --endpoint-url "$ep" --log error sync "$TREE/" "s3://$BUCKET/$prefix/") ;;
        rclone) CMD=(rclone sync "$TREE" "B:$BUCKET/$prefix") ;;
        aws) CMD=(aws s3 sync --only-show-errors "$TREE" "s3://$BUCKET/$prefix/") ;;
        esac
        return
    fi
    case "$tool" in
    fastwrite) CMD=("$FW" extract "$WHEEL" -o "$SCHEME://$BUCKET/$prefix/") ;;
    fastwrite-base) CMD=("$FW_BASE" extract "$WHEEL" -o "$SCHEME://$BUCKET/$prefix/") ;;
    fastwrite-mirror) CMD=("$FW" mirror "$TREE" "$SCHEME://$BUCKET/$prefix/") ;;
    fastwrite-markers) CMD=("$FW" extract "$WHEEL" -o "$SCHEME://$BUCKET/$prefix/" --folder-markers) ;;
    fastwrite-uploads-*) CMD=("$FW" extract "$WHEEL" -o "$SCHEME://$BUCKET/$prefix/" --uploads "${tool#fastwrite-uploads-}") ;;
    unzip+s5cmd)
        # shellcheck disable=SC2016  # expanded by the inner bash
        CMD=(bash -c 'unzip -q "$1" -d "$2" && exec "$3" --endpoint-url "$4" --log error cp "$2/*" "$5"'
            _ "$WHEEL" "$WORK/unzip/$id" "$S5" "$ep" "s3://$BUCKET/$prefix/") ;;
    s5cmd) CMD=("$S5" --endpoint-url "$ep" --log error cp "$TREE/*" "s3://$BUCKET/$prefix/") ;;
    rclone) CMD=(rclone copy "$TREE" "B:$BUCKET/$prefix") ;;
    rclone-t64) CMD=(rclone copy --transfers 64 "$TREE" "B:$BUCKET/$prefix") ;;
    aws) CMD=(aws s3 cp --recursive --only-show-errors "$TREE" "s3://$BUCKET/$prefix/") ;;
    esac
}

# Azure: Get Blob Properties of KEY, anonymous: its x-ms-meta-* headers and Last-Modified, as
# JSON in HeadObject's shape.
azure_head() {  # azure_head KEY
    curl -sI "$DIRECT/$AZ_ACCOUNT/$BUCKET/$1" | python3 -c 'import json, sys
h = [l.rstrip("\r\n").split(": ", 1) for l in sys.stdin if ": " in l]
meta = {k.lower()[len("x-ms-meta-"):]: v for k, v in h if k.lower().startswith("x-ms-meta-")}
last = next((v for k, v in h if k.lower() == "last-modified"), None)
print(json.dumps({"Metadata": meta, "LastModified": last}, sort_keys=True))'
}

# --download: what a run's folder holds, in a listing's shape (Key: PREFIX/ + the file's path),
# with how many files have TREE's mtime (to the second) and permission bits; anything but a
# regular file or a folder is listed with Size -1 (so it counts as of another size, or extra).
list_folder() {  # list_folder DIR PREFIX FILE
    python3 - "$1" "$2" "$TREE" >"$3" <<'PY'
import json, os, stat, sys
root, prefix, tree = sys.argv[1:]
contents, mtimes, modes = [], 0, 0
for d, dirs, files in os.walk(root):
    for n in files + [n for n in dirs if os.path.islink(os.path.join(d, n))]:
        p = os.path.join(d, n)
        rel = os.path.relpath(p, root)
        st = os.lstat(p)
        regular = stat.S_ISREG(st.st_mode)
        contents.append({"Key": f"{prefix}/{rel}", "Size": st.st_size if regular else -1})
        try:
            t = os.lstat(os.path.join(tree, rel))
        except OSError:
            continue
        if regular and int(st.st_mtime) == int(t.st_mtime):
            mtimes += 1
        if regular and stat.S_IMODE(st.st_mode) == stat.S_IMODE(t.st_mode):
            modes += 1
print(json.dumps({"Contents": contents, "MtimesKept": mtimes, "ModesKept": modes}))
PY
}
# What a prefix holds, straight from the server (all pages), into FILE ('{}' if it cannot be
# listed).
list_prefix() {  # list_prefix PREFIX FILE
    if [[ "$STORE" == gcs ]]; then
        # The JSON API's list, every page, in ListObjectsV2's shape.
        python3 - "$DIRECT/storage/v1/b/$BUCKET/o" "$1/" >"$2" <<'PY' || echo '{}' >"$2"
import json, sys, urllib.parse, urllib.request
base, prefix = sys.argv[1:]
contents, token = [], ""
while True:
    q = urllib.parse.urlencode({"prefix": prefix, "pageToken": token})
    page = json.load(urllib.request.urlopen(f"{base}?{q}", timeout=60))
    contents += [{"Key": o["name"], "Size": int(o["size"])} for o in page.get("items", [])]
    token = page.get("nextPageToken", "")
    if not token:
        break
print(json.dumps({"Contents": contents}))
PY
        return
    fi
    if [[ "$STORE" == azure ]]; then
        # List Blobs of the public container, every page, in ListObjectsV2's shape.
        python3 - "$DIRECT/$AZ_ACCOUNT/$BUCKET" "$1/" >"$2" <<'PY' || echo '{}' >"$2"
import json, re, sys, urllib.parse, urllib.request
base, prefix = sys.argv[1:]
contents, marker = [], ""
while True:
    q = urllib.parse.urlencode({"restype": "container", "comp": "list", "prefix": prefix, "marker": marker})
    xml = urllib.request.urlopen(f"{base}?{q}", timeout=60).read().decode()
    for blob in re.findall(r"<Blob>(.*?)</Blob>", xml, re.S):
        name = re.search(r"<Name>(.*?)</Name>", blob, re.S).group(1)
        name = name.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'").replace("&amp;", "&")
        size = int(re.search(r"<Content-Length>(\d+)</Content-Length>", blob).group(1))
        contents.append({"Key": name, "Size": size})
    m = re.search(r"<NextMarker>(.*?)</NextMarker>", xml, re.S)
    if not m or not m.group(1):
        break
    marker = m.group(1)
print(json.dumps({"Contents": contents}))
PY
        return
    fi
    if ! aws_direct s3api list-objects-v2 --bucket "$BUCKET" --prefix "$1/" --output json \
        >"$2" 2>"${2%.json}.err"; then
        echo '{}' >"$2"
    fi
}

if [[ "$MODE" == download ]]; then  # prefix: the run's folder, WORK/down/ID, as down-out/ID
    printf 'delay_ms\tround\tslot\ttool\tprefix\texit\tstatus\twall_s\tuser_s\tsys_s\tmaxrss_kib\tkeys\trequests\tserver_cpu_s\tproxy_cpu_s\tmtimes_kept\tmodes_kept\n' >"$TSV"
else
    printf 'delay_ms\tround\tslot\ttool\tprefix\texit\tstatus\twall_s\tuser_s\tsys_s\tmaxrss_kib\tkeys\trequests\tserver_cpu_s\tproxy_cpu_s\n' >"$TSV"
fi

run_one() {  # run_one DELAY ROUND SLOT TOOL ENDPOINT STATS
    local delay="$1" round="$2" slot="$3" tool="$4" ep="$5" stats="$6"
    local prefix="${delay}ms/r$round/$tool" id rc t0 t1 s0 s1 p0 p1 times setup=""
    [[ "$delay" == direct ]] && prefix="direct/r$round/$tool"
    id="${prefix//\//-}"
    if [[ "$MODE" == sync ]]; then  # always the tool's own prefix, as the setup left it
        id="sync-$id"
        prefix="sync/$tool"
        setup="$WORK/lists/setup-$tool.json"
    fi
    if [[ "$MODE" == download ]]; then
        id="down-$id"
        prefix="down-out/$id"  # the folder's files, listed as if under this prefix
    fi
    tool_cmd "$tool" "$ep" "$prefix" "$id"
    [[ "$STORE" == azure ]] && fresh_azurite
    sync  # the previous run's writes (the server's, unzip's) land now, untimed
    cp -- "$stats" "$WORK/logs/$id.stats-before.json"
    s0="$(cpu_of "$SERVER_PID")" p0="$(cpu_of "$PROXY_PID")"
    t0=$EPOCHREALTIME
    if /usr/bin/time -f '%U %S %M' -o "$WORK/logs/$id.time" timeout -k 10 "$TIMEOUT" "${CMD[@]}" \
        </dev/null >"$WORK/logs/$id.log" 2>&1; then rc=0; else rc=$?; fi
    t1=$EPOCHREALTIME
    s1="$(cpu_of "$SERVER_PID")" p1="$(cpu_of "$PROXY_PID")"
    cp -- "$stats" "$WORK/logs/$id.stats-after.json"
    times="$(tail -n 1 "$WORK/logs/$id.time")"  # a failed run has a line before it
    if [[ "$MODE" == download ]]; then
        list_folder "$WORK/down/$id" "$prefix" "$WORK/lists/$id.json"
    else
        list_prefix "$prefix" "$WORK/lists/$id.json"
    fi
    # Azure: the sample's metadata now, before the next run's fresh server.
    [[ "$STORE" == azure ]] && azure_head "$prefix/$SAMPLE" >"$WORK/lists/$id.head.json"
    python3 - "$WORK/manifest.tsv" "$WORK/lists/$id.json" "$prefix/" "$rc" \
        "$WORK/logs/$id.stats-before.json" "$WORK/logs/$id.stats-after.json" \
        "$delay" "$round" "$slot" "$tool" "$t0" "$t1" "$times" "$s0" "$s1" "$p0" "$p1" "$setup" >>"$TSV" <<'PY'
import json, sys
(manifest, listing, prefix, rc, before, after, delay, rnd, slot, tool,
 t0, t1, times, s0, s1, p0, p1, setup) = sys.argv[1:]
want = dict(l.rstrip("\n").split("\t") for l in open(manifest))
def objects(path):
    try:
        return {o["Key"][len(prefix):]: o for o in (json.load(open(path)) or {}).get("Contents", [])}
    except (ValueError, KeyError):
        return {}
objs = objects(listing)
# --folder-markers: the folders' `dir/` markers besides the files, each empty.
markers = [k for k in objs if k.endswith("/")] if tool == "fastwrite-markers" else []
bad_markers = [k for k in markers if str(objs[k]["Size"]) != "0"]
objs = {k: o for k, o in objs.items() if k not in markers}
got = {k: str(o["Size"]) for k, o in objs.items()}
missing = sum(1 for k in want if k not in got)
extra = sum(1 for k in got if k not in want)
sizes = sum(1 for k in want if k in got and got[k] != want[k])
a = json.load(open(before))["requests"] if open(before).read().strip() else {}
b = json.load(open(after))["requests"]
req = {m: b[m] - a.get(m, 0) for m in sorted(b) if b[m] - a.get(m, 0)}
problems = []
if tool == "fastwrite-markers" and (not markers or bad_markers):
    problems.append(f"{len(markers)} folder markers, {len(bad_markers)} of them not empty")
if rc != "0":
    problems.append(f"exit {rc}" + (" (timeout)" if rc in ("124", "137") else ""))
if len(got) != len(want) or missing or extra or sizes:
    problems.append(f"{len(got)} keys, expected {len(want)} ({missing} missing, {extra} extra, "
                    f"{sizes} of another size)")
if setup:  # --sync: nothing to do, so nothing written
    writes = {m: n for m, n in req.items() if m in ("PUT", "POST", "DELETE")}
    if writes:
        problems.append("wrote with nothing to do: " + ", ".join(f"{m} {n}" for m, n in writes.items()))
    was = objects(setup)
    rewritten = sum(1 for k, o in objs.items() if k in was and
                    (o["LastModified"], o["ETag"]) != (was[k]["LastModified"], was[k]["ETag"]))
    if rewritten:
        problems.append(f"{rewritten} objects rewritten (LastModified or ETag changed since the setup)")
status = "ok" if not problems else "FAILED: " + "; ".join(problems)
user, system, rss = (times.split() + ["", "", ""])[:3]
kept = []  # --download: the files with TREE's mtime, and with its mode
try:
    listed = json.load(open(listing)) or {}
    if "MtimesKept" in listed:
        kept = [str(listed["MtimesKept"]), str(listed["ModesKept"])]
except ValueError:
    pass
print("\t".join([delay, rnd, slot, tool, prefix.rstrip("/"), rc, status, f"{float(t1) - float(t0):.3f}",
                 user, system, rss, str(len(got)), json.dumps(req, separators=(",", ":")),
                 f"{float(s1) - float(s0):.2f}", f"{float(p1) - float(p0):.2f}"] + kept))
PY
    local line
    line="$(tail -n 1 "$TSV")"
    printf 's3: %9s round %s %-12s %7.2f s  client CPU %5.2f s  %s\n' \
        "$([[ $delay == direct ]] && echo direct || echo "$delay ms")" "$round" "$tool" \
        "$(cut -f8 <<<"$line")" "$(awk -F'\t' '{ print $9 + $10 }' <<<"$line")" "$(cut -f7 <<<"$line")" >&2
}

# --sync's setup, untimed: each tool syncs TREE into its own prefix, straight to the server; the
# prefix must then hold exactly TREE's files, and its listing is what every run must leave.
# --download's: fastwrite mirrors TREE into s3://bench/down, what every run downloads.
sync_setup() {
    local tool
    export AWS_ENDPOINT_URL="$DIRECT" RCLONE_CONFIG_B_ENDPOINT="$DIRECT"
    for tool in "${TOOLS[@]}"; do
        tool_cmd "$tool" "$DIRECT" "sync/$tool" "setup-$tool"
        setup_one "$tool" "sync/$tool"
    done
}
download_setup() {
    if [[ "$STORE" == gcs ]]; then  # fake-gcs-server takes rclone's uploads, not fastwrite's
        point_at "$DIRECT"
        CMD=(rclone copy --transfers 64 "$TREE" "B:$BUCKET/down")
        setup_one rclone down
        return
    fi
    export AWS_ENDPOINT_URL="$DIRECT" RCLONE_CONFIG_B_ENDPOINT="$DIRECT"
    CMD=("$FW" mirror "$TREE" "s3://$BUCKET/down")
    setup_one fastwrite down
}
setup_one() {  # setup_one TOOL PREFIX: run CMD, straight to the server; PREFIX must hold TREE
    local tool="$1" prefix="$2" rc t0 t1 check
    t0=$EPOCHREALTIME
    if timeout -k 10 "$TIMEOUT" "${CMD[@]}" </dev/null >"$WORK/logs/setup-$tool.log" 2>&1; then rc=0; else rc=$?; fi
    t1=$EPOCHREALTIME
    list_prefix "$prefix" "$WORK/lists/setup-$tool.json"
    check="$(python3 - "$WORK/manifest.tsv" "$WORK/lists/setup-$tool.json" "$prefix/" <<'PY'
import json, sys
manifest, listing, prefix = sys.argv[1:]
want = dict(l.rstrip("\n").split("\t") for l in open(manifest))
try:
    got = {o["Key"][len(prefix):]: str(o["Size"]) for o in (json.load(open(listing)) or {}).get("Contents", [])}
except (ValueError, KeyError):
    got = {}
print("ok" if got == want else f"{len(got)} keys, expected {len(want)} "
      f"({sum(1 for k in want if k not in got)} missing, {sum(1 for k in got if k not in want)} extra)")
PY
)"
    if (( rc != 0 )) || [[ "$check" != ok ]]; then
        echo "s3: setup: $tool did not copy TREE into s3://$BUCKET/$prefix/ (exit $rc; $check): see $WORK/logs/setup-$tool.log" >&2
        exit 1
    fi
    printf 's3: setup %-10s %7.2f s  straight to the server, untimed: %s keys in s3://%s/%s/\n' \
        "$tool" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$EXPECTED" "$BUCKET" "$prefix" >&2
}

# After the report: stop the server and the proxy; keep the work folder if a run failed (or
# KEEP_WORK=1), else delete it (only now: deleting during the bench would slow the server's
# file creation).
finish_bench() {
    trap - EXIT
    on_exit
    if (( failed )); then
        echo "s3: some runs FAILED (see above); outputs and logs kept in $WORK" >&2
        exit 1
    fi
    if [[ "${KEEP_WORK:-0}" == 1 ]]; then
        echo "outputs kept in $WORK" >&2
    else
        cleanup_workdir "$WORK"
    fi
}

# --- --memory ---------------------------------------------------------------------------------
mem_run() {  # mem_run NAME PREFIX MTIME MODE PREVIOUS COMMAND...: MTIME, MODE: the sample's own
    local name="$1" prefix="$2" mtime="$3" mode="$4" previous="$5" rc t0 t1 s0 s1 line
    shift 5
    sync  # the previous run's writes (the server's) land now, untimed
    s0="$(cpu_of "$SERVER_PID")"
    t0=$EPOCHREALTIME
    if /usr/bin/time -v -o "$WORK/logs/$name.time" timeout -k 10 "$TIMEOUT" "$@" \
        </dev/null >"$WORK/logs/$name.log" 2>&1; then rc=0; else rc=$?; fi
    t1=$EPOCHREALTIME
    s1="$(cpu_of "$SERVER_PID")"
    # What the prefix holds (s5cmd: all pages, one JSON object a key), and the sample's metadata.
    "$S5" --endpoint-url "$DIRECT" --json ls "s3://$BUCKET/$prefix/*" \
        >"$WORK/lists/$name.jsonl" 2>"$WORK/lists/$name.err" || true
    aws_direct s3api head-object --bucket "$BUCKET" --key "$prefix/$MEM_SAMPLE" --output json \
        >"$WORK/lists/$name.head.json" 2>"$WORK/lists/$name.head.err" || echo '{}' >"$WORK/lists/$name.head.json"
    python3 - "$WORK/manifest.tsv" "$WORK/lists/$name.jsonl" "s3://$BUCKET/$prefix/" "$rc" "$name" \
        "$t0" "$t1" "$WORK/logs/$name.time" "$WORK/logs/$name.log" "$WORK/lists/$name.head.json" \
        "$mtime" "$mode" "$previous" "$s0" "$s1" >>"$TSV" <<'PY'
import json, re, sys
(manifest, listing, url, rc, name, t0, t1, timefile, log, head, mtime, mode, previous,
 s0, s1) = sys.argv[1:]
want = dict(l.rstrip("\n").split("\t") for l in open(manifest))
def objects(path):
    objs = {}
    for line in open(path):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type", "file") == "file" and o.get("key", "").startswith(url):
            objs[o["key"][len(url):]] = o
    return objs
objs = objects(listing)
got = {k: str(o.get("size", 0)) for k, o in objs.items()}
missing = sum(1 for k in want if k not in got)
extra = sum(1 for k in got if k not in want)
sizes = sum(1 for k in want if k in got and got[k] != want[k])
tv = {}
for l in open(timefile):
    k, _, v = l.strip().rpartition(": ")
    tv[k] = v
text = open(log, errors="replace").read()
requests = re.search(r"(\d+) requests", text)
unchanged = re.search(r"^unchanged:\s+(\d+)", text, re.M)
try:
    h = json.load(open(head))
except ValueError:
    h = {}
meta = h.get("Metadata", {})
problems = []
if rc != "0":
    problems.append(f"exit {rc}" + (" (timeout)" if rc in ("124", "137") else ""))
if len(got) != len(want) or missing or extra or sizes:
    problems.append(f"{len(got)} keys, expected {len(want)} ({missing} missing, {extra} extra, "
                    f"{sizes} of another size)")
try:
    right = float(meta.get("mtime", "nan")) == float(mtime) and meta.get("mode") == mode
except ValueError:
    right = False
if not right:
    problems.append(f"sample metadata {json.dumps(meta, sort_keys=True)}, expected mtime {mtime}, mode {mode}")
if previous:  # nothing to do
    if not unchanged or int(unchanged[1]) != len(want):
        problems.append(f"unchanged {unchanged[1] if unchanged else '?'} of {len(want)} (--stats)")
    was = objects(previous)
    rewritten = sum(1 for k, o in objs.items() if k in was and
                    (o.get("last_modified"), o.get("etag")) != (was[k].get("last_modified"), was[k].get("etag")))
    if rewritten:
        problems.append(f"{rewritten} objects rewritten (LastModified or ETag changed)")
status = "ok" if not problems else "FAILED: " + "; ".join(problems)
print("\t".join([name, url, rc, status, f"{float(t1) - float(t0):.3f}",
                 tv.get("User time (seconds)", ""), tv.get("System time (seconds)", ""),
                 tv.get("Maximum resident set size (kbytes)", ""), str(len(got)),
                 requests[1] if requests else "", unchanged[1] if unchanged else "",
                 f"{float(s1) - float(s0):.2f}",
                 json.dumps({"Metadata": meta, "LastModified": h.get("LastModified")}, sort_keys=True)]))
PY
    line="$(tail -n 1 "$TSV")"
    printf 's3: %-12s %7.2f s  max RSS %7.1f MiB  client CPU %6.2f s  %s\n' "$name" \
        "$(cut -f5 <<<"$line")" "$(awk -F'\t' '{ print $8 / 1024 }' <<<"$line")" \
        "$(awk -F'\t' '{ print $6 + $7 }' <<<"$line")" "$(cut -f4 <<<"$line")" >&2
}

if [[ "$MODE" == memory ]]; then
    printf 'run\tprefix\texit\tstatus\twall_s\tuser_s\tsys_s\tmaxrss_kib\tkeys\trequests\tunchanged\tserver_cpu_s\tsample_head\n' >"$TSV"
    MEM_SAMPLE="d000/f000.txt"
    read -r tar_mtime tar_mode < <(python3 -c 'import sys, tarfile; m = tarfile.open(sys.argv[1]).getmember(sys.argv[2]); print(int(m.mtime), m.mode | 0o100000)' "$TAR" "$MEM_SAMPLE")
    read -r tree_mtime tree_mode < <(stat -c '%Y %f' -- "$SMALL/$MEM_SAMPLE")
    tree_mode=$((16#$tree_mode))
    export AWS_ENDPOINT_URL="$DIRECT" RCLONE_CONFIG_B_ENDPOINT="$DIRECT"
    wait_for_fast_creates "$WORK"  # the server creates COUNT files a run: wait out recent deletes
    free_memory_for_batch "$TAR"
    cat -- "$TAR" >/dev/null
    warn_if_busy
    mem_run extract mem-extract "$tar_mtime" "$tar_mode" "" \
        "$FW" extract --stats "$TAR" -o "s3://$BUCKET/mem-extract/"
    mem_run mirror mem-mirror "$tree_mtime" "$tree_mode" "" \
        "$FW" mirror --stats "$SMALL" "s3://$BUCKET/mem-mirror/"
    mem_run mirror-noop mem-mirror "$tree_mtime" "$tree_mode" "$WORK/lists/mirror.jsonl" \
        "$FW" mirror --stats "$SMALL" "s3://$BUCKET/mem-mirror/"
    failed=0
    if grep -q $'\tFAILED' "$TSV"; then failed=1; fi
    {
        python3 - "$TSV" "$EXPECTED" "$SMALL_SIZE" "$(stat -c %s "$TAR")" "$(basename "$TAR")" "$MEM_SAMPLE" "$versions" <<'PY'
import datetime, json, os, sys
tsv, count, size, tar_bytes, tar, sample, versions = sys.argv[1:]
count = int(count)
rows = [l.rstrip("\n").split("\t") for l in open(tsv)]
rows = [dict(zip(rows[0], r)) for r in rows[1:]]
print(f"S3 memory: {versions}; {datetime.date.today()}, {os.cpu_count()} cores, {os.uname().release}. "
      f"{count:,} files of {size} bytes in folders of 1,000 ({tar}, {int(tar_bytes) / 1e6:.0f} MB), "
      "straight to the server (no proxy), each command once. Max RSS: GNU time's maximum resident "
      "set size (fastwrite's); client CPU = user + system; requests = as fastwrite's --stats "
      "counted them; server = CPU the server spent during the run.\n")
what = {"extract": f"`fastwrite extract {tar} -o s3://bench/mem-extract/`",
        "mirror": f"`fastwrite mirror {tar[:-4]} s3://bench/mem-mirror/` (a fresh prefix)",
        "mirror-noop": "the same mirror again: nothing to do"}
print("| run | command | wall | max RSS | client CPU | keys | requests | unchanged | server CPU | status |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for r in rows:
    rss = f"{int(r['maxrss_kib']) / 1024:.1f} MiB" if r["maxrss_kib"] else "-"
    cpu = f"{float(r['user_s'] or 0) + float(r['sys_s'] or 0):.2f} s"
    print(f"| {r['run']} | {what.get(r['run'], '')} | {float(r['wall_s']):.2f} s | {rss} | {cpu} "
          f"| {int(r['keys']):,} | {r['requests'] or '-'} | {r['unchanged'] or '-'} "
          f"| {float(r['server_cpu_s']):.2f} s | {r['status']} |")
print(f"\nHeadObject of `{sample}` after each run:\n")
print("| run | user metadata | LastModified |")
print("| --- | --- | --- |")
for r in rows:
    h = json.loads(r["sample_head"])
    meta = ", ".join(f"`{k}: {v}`" for k, v in sorted(h["Metadata"].items())) or "none"
    print(f"| {r['run']} | {meta} | {h['LastModified']} |")
PY
    } | tee "$MD"
    echo
    echo "results: $MD"
    echo "         $TSV"
    finish_bench
    exit 0
fi

# --- the rounds -------------------------------------------------------------------------------
# The object whose metadata the report shows.
SAMPLE="botocore/__init__.py"
grep -q "^$SAMPLE"$'\t' "$WORK/manifest.tsv" || SAMPLE="$(head -n 1 "$WORK/manifest.tsv" | cut -f1)"

wait_for_fast_creates "$WORK"  # the server creates 2,039 files a run: wait out recent deletes
free_memory_for_batch "$TREE"
cat -- "$WHEEL" >/dev/null
start_proxy() {  # start_proxy DELAY STATS: sets PROXY_PID, prints the proxy's endpoint
    local out="$WORK/proxy-${1}ms.out" port=""
    if [[ "${BENCH_PROXY:-python}" == compiled ]]; then
        "$DELAY_PROXY" 0 "$SPORT" "$1" </dev/null >"$out" 2>&1 &
    else
        python3 "$repo/lab/s3-proxy.py" 0 "$SPORT" --delay-ms "$1" --stats "$2" </dev/null >"$out" 2>&1 &
    fi
    PROXY_PID=$!
    for _ in $(seq 100); do
        port="$(sed -n 's/^listening on \([0-9]*\)$/\1/p' "$out")"
        [[ -n "$port" ]] && break
        kill -0 "$PROXY_PID" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$port" ]] || { echo "s3: the proxy did not start:" >&2; cat "$out" >&2; exit 1; }
    EP="http://127.0.0.1:$port"
}

[[ "$MODE" == sync ]] && sync_setup
if [[ "$MODE" == download ]]; then
    mkdir -p "$WORK/down"
    download_setup
fi

for delay in "${DELAYS[@]}"; do
    STATS="$WORK/proxy-${delay}ms.json"
    echo '{"requests": {}, "faults": {}}' >"$STATS"
    if [[ "$delay" == direct ]]; then
        EP="$DIRECT"
        echo "s3: straight to the server ($DIRECT), no proxy: requests not counted" >&2
    else
        start_proxy "$delay" "$STATS"
        echo "s3: ${delay} ms each way (proxy $EP -> $DIRECT)" >&2
    fi
    point_at "$EP"
    warn_if_busy
    for ((round = 1; round <= RUNS; round++)); do
        for ((i = 0; i < ${#TOOLS[@]}; i++)); do  # round-robin, each round one tool further on
            run_one "$delay" "$round" "$((i + 1))" "${TOOLS[(round - 1 + i) % ${#TOOLS[@]}]}" "$EP" "$STATS"
        done
    done
    if [[ -n "$PROXY_PID" ]]; then
        kill "$PROXY_PID" 2>/dev/null || true
        wait "$PROXY_PID" || true
        PROXY_PID=""
    fi
done
failed=0
if grep -q $'\tFAILED' "$TSV"; then failed=1; fi

# --- the report -------------------------------------------------------------------------------
# Which tools keep a file's mtime: the user metadata of one object, from each tool's first good
# run, beside the file's mtime in the wheel (as unzip set it on TREE). --download: the object
# every run downloaded (as the setup's fastwrite mirror stored it).
: >"$WORK/heads.tsv"
heads_of=("${TOOLS[@]}")
[[ "$MODE" == download ]] && heads_of=("setup: fastwrite mirror")
[[ "$STORE" == gcs ]] && heads_of=("setup: rclone copy")
for tool in "${heads_of[@]}"; do
    if [[ "$MODE" == download ]]; then
        prefix=down
    else
        prefix="$(awk -F'\t' -v t="$tool" '$4 == t && $7 == "ok" { print $5; exit }' "$TSV")"
    fi
    [[ -n "$prefix" ]] || continue
    if [[ "$STORE" == azure ]]; then  # as run_one read it, before the next run's fresh server
        head="$(cat "$WORK/lists/${prefix//\//-}.head.json")"
    elif [[ "$STORE" == gcs ]]; then  # the JSON API's resource, in HeadObject's shape
        head="$(curl -sf "$DIRECT/storage/v1/b/$BUCKET/o/$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$prefix/$SAMPLE")" |
            python3 -c 'import json, sys; h = json.load(sys.stdin); print(json.dumps({"Metadata": h.get("metadata", {}), "LastModified": h.get("updated")}, sort_keys=True))')"
    else
        head="$(aws_direct s3api head-object --bucket "$BUCKET" --key "$prefix/$SAMPLE" --output json |
            python3 -c 'import json, sys; h = json.load(sys.stdin); print(json.dumps({"Metadata": h.get("Metadata", {}), "LastModified": h.get("LastModified")}, sort_keys=True))')"
    fi
    printf '%s\t%s\n' "$tool" "$head" >>"$WORK/heads.tsv"
done

{
    BENCH_STORE="$STORE" python3 - "$TSV" "$WORK/heads.tsv" "$SAMPLE" "$(stat -c %Y "$TREE/$SAMPLE")" "$EXPECTED" "$RUNS" "$versions" "$MODE" <<'PY'
import collections, datetime, json, os, statistics, sys
tsv, heads, sample, sample_mtime, expected, runs, versions, mode = sys.argv[1:]
expected, runs = int(expected), int(runs)
rows = [l.rstrip("\n").split("\t") for l in open(tsv)][1:]
cols = ["delay", "round", "slot", "tool", "prefix", "exit", "status", "wall", "user", "sys",
        "rss", "keys", "requests", "server", "proxy", "mtimes", "modes"]
rows = [dict(zip(cols, r)) for r in rows]
if mode == "sync":
    print(f"S3 sync: {versions}; {datetime.date.today()}, {os.cpu_count()} cores, {os.uname().release}. "
          f"A sync with nothing to do: the botocore wheel's tree ({expected:,} files), copied into "
          "each tool's own prefix by that tool's own sync (untimed), synced again each run, "
          f"{runs} round(s), tools round-robin; a run counts only if it wrote nothing (no PUT, POST "
          "or DELETE, no object's LastModified or ETag changed). Median of the good runs; ratio = "
          "the tool's / fastwrite's (above 1: slower than fastwrite); client CPU = user + system "
          "of the client and its children (per object: per file compared); requests = per run, "
          "by method, as the proxy counted them (the first good run's); server, proxy = CPU the "
          "server and the proxy spent during the run.")
elif mode == "download":
    gcs = os.environ.get("BENCH_STORE") == "gcs"
    uploaded = ("`rclone copy --transfers 64 TREE B:bench/down`" if gcs
                else "`fastwrite mirror TREE s3://bench/down`")
    print(f"{'GCS (fake-gcs-server)' if gcs else 'S3'} download: {versions}; {datetime.date.today()}, {os.cpu_count()} cores, {os.uname().release}. "
          f"A prefix of {expected:,} objects (the botocore wheel's tree, uploaded once by {uploaded}, "
          "untimed) downloaded into a fresh local folder each run, "
          f"{runs} round(s), tools round-robin; a run counts only if the folder then holds exactly "
          "TREE's files with their sizes. Median of the good runs; ratio = the tool's / "
          "fastwrite's (above 1: slower than fastwrite); client CPU = user + system of the client "
          "and its children (per object: per file downloaded); requests = per run, by method, as "
          "the proxy counted them (the first good run's); server, proxy = CPU the server and the "
          "proxy spent during the run.")
else:
    print(f"{'Azure (Azurite)' if os.environ.get('BENCH_STORE') == 'azure' else 'S3'}: {versions}; {datetime.date.today()}, {os.cpu_count()} cores, {os.uname().release}. "
          f"The botocore wheel ({expected:,} files) into a fresh prefix each run, {runs} round(s), "
          "tools round-robin. Median of the good runs; ratio = the tool's / fastwrite's (above 1: "
          "slower than fastwrite); client CPU = user + system of the client and its children "
          "(unzip+s5cmd: both); requests = per run, by method, as the proxy counted them (the "
          "first good run's); server, proxy = CPU the server and the proxy spent during the run.")
order = list(dict.fromkeys(r["tool"] for r in rows))
for delay in dict.fromkeys(r["delay"] for r in rows):
    by = collections.defaultdict(list)
    for r in rows:
        if r["delay"] == delay:
            by[r["tool"]].append(r)
    med = {}
    for tool, rs in by.items():
        good = [r for r in rs if r["status"] == "ok"]
        if good:
            med[tool] = dict(
                wall=statistics.median(float(r["wall"]) for r in good),
                cpu=statistics.median(float(r["user"]) + float(r["sys"]) for r in good),
                server=statistics.median(float(r["server"]) for r in good),
                proxy=statistics.median(float(r["proxy"]) for r in good),
                req=json.loads(good[0]["requests"]), n=len(good), of=len(rs))
    fw = med.get("fastwrite")
    print("\n### " + ("straight to the server, no proxy (requests not counted)" if delay == "direct"
                       else f"{delay} ms each way") + "\n")
    print("| tool | good runs | wall | / fastwrite | client CPU | per object | / fastwrite "
          "| requests per run | server CPU | proxy CPU |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |")
    for tool in order:
        if tool not in by:
            continue
        if tool not in med:
            print(f"| {tool} | 0 of {len(by[tool])} | FAILED | | | | | | | |")
            continue
        m = med[tool]
        ratio = f"{m['wall'] / fw['wall']:.2f}" if fw else "-"
        cratio = f"{m['cpu'] / fw['cpu']:.2f}" if fw and fw["cpu"] else "-"
        req = ", ".join(f"{k} {v}" for k, v in sorted(m["req"].items(), key=lambda kv: -kv[1])) or "-"
        print(f"| {tool} | {m['n']} of {m['of']} | {m['wall']:.2f} s | {ratio} | {m['cpu']:.2f} s "
              f"| {m['cpu'] / expected * 1e6:.0f} µs | {cratio} | {req} | {m['server']:.2f} s "
              f"| {m['proxy']:.2f} s |")
bad = [r for r in rows if r["status"] != "ok"]
if bad:
    print("\nFailed runs:\n")
    for r in bad:
        print(f"- {r['delay']}{'' if r['delay'] == 'direct' else ' ms'}, round {r['round']}, {r['tool']} ({r['prefix']}/): {r['status']}")
if mode == "download":
    print(f"\n### The mtimes and modes each tool restored\n\nFiles of the {expected:,} whose mtime "
          "equals TREE's (to the second) and whose permission bits equal TREE's, in each good run "
          "(the same in all of them, or the range).\n")
    print("| tool | good runs | mtime as in TREE | mode as in TREE |")
    print("| --- | ---: | ---: | ---: |")
    for tool in order:
        good = [r for r in rows if r["tool"] == tool and r["status"] == "ok"]
        if not good:
            print(f"| {tool} | 0 | - | - |")
            continue
        def span(k):
            v = sorted(int(r[k]) for r in good)
            return f"{v[0]:,}" if v[0] == v[-1] else f"{v[0]:,}-{v[-1]:,}"
        print(f"| {tool} | {len(good)} | {span('mtimes')} of {expected:,} | {span('modes')} of {expected:,} |")
where = ("in each tool's prefix, as its setup's sync stored it" if mode == "sync"
         else "as the setup stored it, which every run downloaded" if mode == "download"
         else "from each tool's first good run")
print(f"\n### The metadata each tool stored\n\nHeadObject of `{sample}` {where}; "
      f"the file's mtime in the wheel (as unzip set it): {sample_mtime} "
      f"({datetime.datetime.fromtimestamp(int(sample_mtime), datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC).\n")
print("| tool | user metadata | LastModified |")
print("| --- | --- | --- |")
for line in open(heads):
    tool, h = line.rstrip("\n").split("\t", 1)
    h = json.loads(h)
    meta = ", ".join(f"`{k}: {v}`" for k, v in sorted(h["Metadata"].items())) or "none"
    print(f"| {tool} | {meta} | {h['LastModified']} |")
PY
} | tee "$MD"
echo
echo "results: $MD"
echo "         $TSV"

# --- cleanup (only now: deleting during the bench would slow the server's file creation) ------
finish_bench
