# shellcheck shell=bash
# Shared helpers for benches/*.sh (sourced, not executed).

# Quote one word for hyperfine -N (no shell; hyperfine splits words itself
# with POSIX quoting rules), so paths with spaces survive.
q() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# Seconds to wait after a previous bench cleanup (rm -rf of thousands of
# files) before timing anything: deletes slow down file creation for about a
# minute on this ext4, whatever directory they were in, so the marker (touched
# by cleanup_workdir) is one per machine, not per cache dir.
SETTLE_MARKER="${TMPDIR:-/tmp}/fastwrite-bench.last-cleanup"
settle_after_cleanup() {
    local marker="$SETTLE_MARKER" settle="${BENCH_SETTLE:-90}" age
    [[ -e "$marker" ]] || return 0
    age=$(( $(date +%s) - $(stat -c %Y "$marker") ))
    if (( age < settle )); then
        echo "bench: last cleanup was ${age}s ago; waiting $((settle - age))s for the filesystem to settle (BENCH_SETTLE=0 to skip)" >&2
        sleep $((settle - age))
    fi
}

# Delete a bench work dir (only after all timing is done), flush, and leave a
# marker so the next bench run knows to settle first.
cleanup_workdir() {
    local work="$1"
    rm -rf -- "$work"
    sync
    touch "$SETTLE_MARKER"
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
