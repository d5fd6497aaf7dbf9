# shellcheck shell=bash
# Shared helpers for benches/*.sh (sourced, not executed).

# Quote one word for hyperfine -N (no shell; hyperfine splits words itself
# with POSIX quoting rules), so paths with spaces survive.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# Why a bench must not time file creation soon after a big delete: ext4
# without a journal (as here) will not reuse an inode until 60 s after its
# deletion, or 360 s if its inode-table block is dirty again -- which it is as
# soon as new files are created next to it (fs/ext4/ialloc.c, recently_deleted:
# RECENTCY_MIN 60 + RECENTCY_DIRTY 300).  Each new file's inode search then
# walks past every such inode, so creating files is several times slower for
# up to 6 minutes after an `rm -rf` of a few thousand files, by this or anything
# else.  Measured here: a 2000-file probe takes ~40 ms normally and 200-1000 ms
# until 360 s after the delete, then drops back at once; unzip of the wheel
# goes from ~200 ms to 400-1000 ms.

# Our own deletes: cleanup_workdir stamps this machine-wide marker, and the
# next bench waits until BENCH_SETTLE (default 370) seconds have passed.
SETTLE_MARKER="${TMPDIR:-/tmp}/fastwrite-bench.last-cleanup"
settle_after_cleanup() {
    local settle="${BENCH_SETTLE:-370}" age
    [[ -e "$SETTLE_MARKER" ]] || return 0
    age=$(( $(date +%s) - $(stat -c %Y "$SETTLE_MARKER") ))
    if (( age < settle )); then
        echo "bench: a bench deleted its outputs ${age}s ago; waiting $((settle - age))s until ext4 reuses those inodes again (BENCH_SETTLE=0 to skip)" >&2
        sleep $((settle - age))
    fi
}

# Anybody's deletes: probe_creates DIR prints the ms taken to create 2000 empty
# files spread over 100 new dirs under DIR (like an extraction, so it touches
# as many block groups).  wait_for_fast_creates DIR re-probes every 15 s until
# that is at most BENCH_PROBE_MS (default 120), for at most BENCH_SETTLE_MAX
# seconds (default 400).  Probe dirs stay in DIR until the bench's cleanup:
# deleting them now would re-arm the very delay we wait out.
probe_creates() {
    python3 - "$1" <<'PY'
import os, sys, time
root = sys.argv[1]
os.mkdir(root)
t = time.perf_counter()
for d in range(100):
    os.mkdir(f"{root}/{d}")
    for f in range(20):
        os.close(os.open(f"{root}/{d}/{f}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644))
print(round((time.perf_counter() - t) * 1000))
PY
}
wait_for_fast_creates() {
    local dir="$1/.probe" limit="${BENCH_PROBE_MS:-120}" max="${BENCH_SETTLE_MAX:-400}"
    local start n=1 ms
    # The probe alone is not enough right after a delete: until the deleted
    # inodes' table blocks get dirty again it can pass (seen: 115 ms 20 s after
    # an rm -rf, then 400 ms during the batch), so first wait out our own.
    settle_after_cleanup
    start="$(date +%s)"
    mkdir -p "$dir"
    while :; do
        while [[ -e "$dir/$n" ]]; do n=$((n + 1)); done
        ms="$(probe_creates "$dir/$n")"
        if (( ms <= limit )); then
            echo "bench: file-creation probe: ${ms} ms for 2000 files (ok, <= ${limit})" >&2
            return 0
        fi
        if (( $(date +%s) - start >= max )); then
            echo "bench: WARNING: file creation still slow after ${max}s (${ms} ms for 2000 files, want <= ${limit}); timings will be skewed" >&2
            return 0
        fi
        echo "bench: file-creation probe: ${ms} ms for 2000 files (> ${limit}): probably files deleted in the last 6 minutes; re-probing in 15 s" >&2
        sleep 15
    done
}

# Delete a bench work dir (only after all timing is done), flush, and stamp
# the marker that settle_after_cleanup reads.
cleanup_workdir() {
    rm -rf -- "$1"
    sync
    touch "$SETTLE_MARKER"
}

# With the page cache filling all memory (the normal state after builds), every
# run's new pages come from reclaim, whose cost depends on the machine's
# history (batches run with <300 MiB free were 1.2-1.5x slower for some tools;
# not fully isolated from other noise, but cheap to rule out).  So, as root and unless
# BENCH_DROP_CACHES=0, start a batch by dropping clean page cache when less
# than 4 GiB is free (a batch needs ~1.5 GiB), then re-read FILE (the archive)
# so that it is hot again (or, for a directory such as a copy's source tree, every file in it).
free_memory_for_batch() {
    local file="$1" free_kb
    free_kb="$(awk '/^MemFree:/ { print $2 }' /proc/meminfo)"
    if (( free_kb >= 4 * 1024 * 1024 )) || [[ "${BENCH_DROP_CACHES:-1}" == 0 ]]; then
        return 0
    fi
    if [[ ! -w /proc/sys/vm/drop_caches ]]; then
        echo "bench: only $((free_kb / 1024)) MiB free and cannot drop caches (not root); timings may include page reclaim" >&2
        return 0
    fi
    echo "bench: only $((free_kb / 1024)) MiB free; dropping clean page cache so runs do not pay for reclaim (BENCH_DROP_CACHES=0 to skip)" >&2
    sync
    echo 1 >/proc/sys/vm/drop_caches
    if [[ -d "$file" ]]; then
        find "$file" -type f -exec cat -- {} + >/dev/null
    else
        cat -- "$file" >/dev/null
    fi
}

# Copy benchmarks write GBs per batch, so the free memory runs out during the batch whatever
# was dropped first, and which runs get it depends on the order. On these VMs that decides the
# timing: memory that sat free for a while is slow to touch again (reading a 4 GiB sparse file
# into the page cache ran at 0.8 GB/s, all of it system time), memory reused by reclaiming page
# cache is not. Measured with hyperfine on the 1 GiB "bigfiles" tree (fcp, cp -a, fcp again,
# xcp; 3 runs + 1 warmup each) starting with ~18 GiB free: cp took 2.7-3.2 s per run and the
# second fcp 1.4-1.5 s against 0.17 s for the first (the same in 3 batches out of 3). After
# fill_free_memory, in two batches: cp 0.36-0.6 s, fcp 0.17-0.22 s, the second fcp 0.23-0.65 s.
# So fill_free_memory DIR reads a sparse file (no disk blocks, no disk I/O) the size of all free
# memory but BENCH_FILL_FREE_MIB (default 1024) into the page cache, untimed (~1 s per GiB):
# every timed run then gets its pages by reclaiming those clean, recently touched pages, the
# same way for every tool. Page cache rather than memory held by a process, so the dirty-page
# limits (a share of the free and page-cache memory) stay what they were. The file stays in DIR
# until the bench's cleanup. lib/batch.sh does this when BENCH_FILL_MEMORY=1.
fill_free_memory() {
    local keep="${BENCH_FILL_FREE_MIB:-1024}" free_mib fill n=1
    free_mib=$(( $(awk '/^MemFree:/ { print $2 }' /proc/meminfo) / 1024 ))
    fill=$(( free_mib - keep ))
    if (( fill < 256 )); then
        echo "bench: ${free_mib} MiB free; no need to fill it" >&2
        return 0
    fi
    while [[ -e "$1/.fill-$n" ]]; do n=$((n + 1)); done
    truncate -s "${fill}M" "$1/.fill-$n"
    dd if="$1/.fill-$n" of=/dev/null bs=1M status=none
    echo "bench: read ${fill} MiB of zeros into the page cache (${free_mib} MiB were free; now $(( $(awk '/^MemFree:/ { print $2 }' /proc/meminfo) / 1024 ))), so every run's pages come from reclaim (BENCH_FILL_MEMORY=0 to skip)" >&2
}

# Two benches at once ruin each other's timings (and one's cleanup slows the
# other's file creation for minutes), so each bench script holds this
# machine-wide lock from start to end; a second one waits for the first.
bench_lock() {
    local lock="${TMPDIR:-/tmp}/fastwrite-bench.lock"
    exec 9>>"$lock"
    if ! flock -n 9; then
        echo "bench: another bench is running (lock $lock); waiting for it to finish" >&2
        flock 9
    fi
}

# Resolve the fastwrite binary: $FASTWRITE, else target/release/fastwrite in
# the repo; print an absolute path or fail with a hint.
resolve_fastwrite() {
    local fw="${FASTWRITE:-$1/target/release/fastwrite}"
    if [[ ! -x "$fw" ]]; then
        echo "bench: fastwrite binary not found at $fw (cargo build --release, or set FASTWRITE)" >&2
        return 1
    fi
    realpath -- "$fw"
}

# EXIT trap: on failure, keep the work dir (for inspection) and say where.
report_failure() {
    local rc=$? tag="$1" work="$2"
    if (( rc != 0 )); then
        echo "$tag: failed (exit $rc); outputs kept in $work" >&2
    fi
}

# Timings on a 2-core machine are meaningless while something else (say a
# cargo build) is busy: warn if the 1-minute load average says so.
warn_if_busy() {
    local load
    load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)"
    if awk -v l="$load" 'BEGIN { exit !(l > 0.5) }'; then
        echo "bench: WARNING: load average is $load; other work on this machine will skew the timings" >&2
    fi
}

# count_runs TAG SLOT EXPECTED: every run's output kept by lib/fresh-dir.sh (SLOT.runs/N) holds
# EXPECTED files; else say which and fail.
count_runs() {
    local run n
    for run in "$2.runs"/*; do
        n=$(find "$run" -type f | wc -l)
        if [[ "$n" != "$3" ]]; then
            echo "$1: VERIFY $run: $n files, expected $3" >&2
            exit 1
        fi
    done
}
