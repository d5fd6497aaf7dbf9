#!/usr/bin/env bash
# Usage: benches/lib/fresh-dir.sh SLOT [--finish]
#
# Used as a hyperfine --prepare command.  The timed command always extracts
# into the fixed path SLOT; before each run this script renames the previous
# run's output out of the way (to SLOT.runs/N, N = next unused number) and
# creates a brand-new empty SLOT.  So every timed run writes into a fresh,
# never-used directory, nothing is deleted during a batch, and the timed
# command needs no wrapper process that would add to its time.
# With --finish it only parks the last run's output (call it after the batch).
#
# Why not `rm -rf SLOT`: on this journal-less ext4, deleting thousands of files
# makes file creation 4-14x slower for 1-6 minutes afterwards (see
# lib/common.sh), which would poison the following runs.
#
# Env: BENCH_SYNC=1 (default) runs `sync` so the previous run's dirty pages are
# written back here, untimed, rather than during the next timed run.
set -euo pipefail

slot="${1:?usage: fresh-dir.sh SLOT [--finish]}"
runs="$slot.runs"
mkdir -p "$runs"

if [[ -e "$slot" ]]; then
    n=1
    while [[ -e "$runs/$n" ]]; do n=$((n + 1)); done
    mv -- "$slot" "$runs/$n"
fi
if [[ "${2:-}" != "--finish" ]]; then
    mkdir -- "$slot"
fi
if [[ "${BENCH_SYNC:-1}" != 0 ]]; then
    sync
fi
