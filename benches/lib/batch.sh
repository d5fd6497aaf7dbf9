# shellcheck shell=bash
# One hyperfine batch of extractors side by side, verified (sourced by benches/*-peers.sh).
#
# The caller fills two arrays with `add NAME CMD...`, where each CMD extracts into $WORK/NAME,
# then calls `run_batch TAG EXPECTED_FILES REFERENCE ARCHIVE`. Every timed run writes into a fresh,
# never-used directory (lib/fresh-dir.sh as hyperfine's --prepare), nothing is deleted during
# the batch, every exit status must be 0, and every output tree must hold EXPECTED_FILES
# regular files and the same content as the REFERENCE tool's (or, when BENCH_TOOLS leaves the
# reference out, the first tool's: BATCH_REFERENCE says which it was).
#
# Env (besides the callers'):
#   BENCH_TOOLS        only the tools named here (space-separated batch names, e.g.
#                      "ripunzip fastwrite"); the others are left out without a word
#   BENCH_RSS=1        each command runs under GNU time (/usr/bin/time, the same fork and exec
#                      for every tool), and each tool's peak resident set per run goes to
#                      <results>.rss.json beside the hyperfine JSON; for a pipeline that is the
#                      largest process in it (wait4's ru_maxrss), not their sum
#   BENCH_RESULTS_LOG  a file to which every finished batch appends "TAG<TAB>JSON" (matrix.sh)
#
# Needs: lib/common.sh sourced, and $here, $WORK, $RESULTS, $RUNS, $WARMUP set.

names=()
cmds=()
BATCH_REFERENCE=""

wanted() {  # wanted NAME: is this tool in the batch (BENCH_TOOLS)?
    [[ -z "${BENCH_TOOLS:-}" || " $BENCH_TOOLS " == *" $1 "* ]]
}

add() {  # add NAME CMD...   (CMD words are quoted for hyperfine -N)
    local name="$1" word cmd=""
    shift
    wanted "$name" || return 0
    if [[ "${BENCH_RSS:-0}" == 1 ]]; then
        [[ -x /usr/bin/time ]] || apt-get install -y -qq time >/dev/null
        mkdir -p -- "$WORK/.rss"
        set -- /usr/bin/time -q -f %M -a -o "$WORK/.rss/$name" "$@"
    fi
    for word in "$@"; do cmd+="${cmd:+ }$(q "$word")"; done
    names+=("$name")
    cmds+=("$cmd")
}

# rss_start: forget the peak RSS lines of earlier (untimed) runs; call right before hyperfine.
rss_start() { rm -rf -- "$WORK/.rss"; mkdir -p -- "$WORK/.rss"; }

# rss_collect JSON: with BENCH_RSS=1, writes each tool's peak RSS per run (KiB, warmup runs
# included) to JSON's .rss.json twin.
rss_collect() {
    [[ "${BENCH_RSS:-0}" == 1 ]] || return 0
    python3 - "$WORK/.rss" "${1%.json}.rss.json" <<'PY'
import json, os, sys
src, out = sys.argv[1], sys.argv[2]
kib = {}
for name in sorted(os.listdir(src)):
    with open(os.path.join(src, name)) as f:
        kib[name] = [int(l) for l in f.read().split() if l.isdigit()]
json.dump({"unit": "KiB", "peak_rss_per_run": kib}, open(out, "w"), indent=1)
PY
}

# log_results TAG JSON: for matrix.sh (BENCH_RESULTS_LOG).
log_results() {
    if [[ -n "${BENCH_RESULTS_LOG:-}" ]]; then printf '%s\t%s\n' "$1" "$2" >> "$BENCH_RESULTS_LOG"; fi
}

have() {
    if command -v "$1" >/dev/null; then return 0; fi
    echo "bench: $1 not installed; skipping it" >&2
    return 1
}

reset_batch() { names=(); cmds=(); }

run_batch() {  # run_batch TAG EXPECTED_FILES REFERENCE ARCHIVE
    local tag="$1" expected="$2" reference="$3" archive="$4" stamp md json
    if (( ${#names[@]} == 0 )); then
        echo "$tag: no tools in the batch (BENCH_TOOLS='${BENCH_TOOLS:-}')" >&2
        return 1
    fi
    if [[ " ${names[*]} " != *" $reference "* ]]; then
        echo "$tag: $reference is not in the batch; outputs are compared with ${names[0]}'s" >&2
        reference="${names[0]}"
    fi
    BATCH_REFERENCE="$reference"
    stamp="$(date +%Y%m%d-%H%M%S)"
    md="$RESULTS/$tag-$stamp.md"
    json="$RESULTS/$tag-$stamp.json"
    wait_for_fast_creates "$WORK"  # first waits out our own recent deletes
    free_memory_for_batch "$archive"
    if [[ "${BENCH_FILL_MEMORY:-0}" == 1 ]]; then fill_free_memory "$WORK"; fi
    warn_if_busy

    local args=(-N --warmup "$WARMUP" --runs "$RUNS" --export-markdown "$md" --export-json "$json")
    local i
    for i in "${!names[@]}"; do
        args+=(--command-name "${names[$i]}" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/${names[$i]}")")
    done
    echo "$tag: $expected files per run, $RUNS runs + $WARMUP warmup per tool" >&2
    # No -i: hyperfine stops (and so does the script) if any run exits non-zero.
    rss_start
    hyperfine "${args[@]}" "${cmds[@]}"
    rss_collect "$json"
    local after_ms
    after_ms="$(probe_creates "$WORK/.probe/after-$tag")"
    if (( after_ms > ${BENCH_PROBE_MS:-120} )); then
        echo "$tag: WARNING: file creation got slow during the batch (${after_ms} ms per 2000 files): treat these timings with suspicion" >&2
    fi

    local bad=0 name d got dirs
    for name in "${names[@]}"; do
        BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$name" --finish
        dirs=("$WORK/$name.runs"/*)
        if (( ${#dirs[@]} != RUNS + WARMUP )); then
            echo "$tag: VERIFY $name: ${#dirs[@]} output dirs, expected $((RUNS + WARMUP))" >&2
            bad=1
        fi
        for d in "${dirs[@]}"; do
            got="$(find "$d" -type f | wc -l)"
            if (( got != expected )); then
                echo "$tag: VERIFY $name: $d has $got files, expected $expected" >&2
                bad=1
            fi
        done
        if [[ "$name" != "$reference" ]] && ! diff -rq --no-dereference "$WORK/$reference.runs/1" "${dirs[0]}" >/dev/null; then
            echo "$tag: VERIFY $name: content differs from $reference's" >&2
            bad=1
        fi
    done
    # hyperfine already refuses non-zero exits; double-check from its JSON.
    python3 - "$json" <<'PY' || bad=1
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if any(c != 0 for c in r.get("exit_codes", [])):
        print(f"VERIFY {r['command']}: non-zero exit codes {r['exit_codes']}", file=sys.stderr)
        sys.exit(1)
PY
    if (( bad )); then
        echo "$tag: verification FAILED" >&2
        return 1
    fi
    echo "$tag: verified $(( ${#names[@]} * (RUNS + WARMUP) )) output trees: $expected files each, all exits 0" >&2

    log_results "$tag" "$json"
    echo
    print_ratios "$tag" "$json"
    echo "results: $md"
    echo "         $json"
}

# print_ratios TAG JSON: each command's mean time as a ratio to the fastest fastwrite variant's
# (to the fastest command's when the batch has no fastwrite row, e.g. peers only).
print_ratios() {
    python3 - "$1" "$2" <<'PY'
import json, sys
tag, path = sys.argv[1], sys.argv[2]
res = json.load(open(path))["results"]
fws = [r for r in res if r["command"].startswith("fastwrite")]
base = min(fws or res, key=lambda r: r["mean"])
what = "fastest fastwrite" if fws else f"fastest tool, {base['command']}: no fastwrite row"
print(f"{tag}: ratios (mean time / {what}; > 1 = slower)")
print(f"{'tool':<28} {'mean s':>8} {'± s':>6} {'ratio':>6}")
for r in sorted(res, key=lambda r: r["mean"]):
    print(f"{r['command']:<28} {r['mean']:8.3f} {r['stddev'] or 0:6.3f} {r['mean']/base['mean']:6.2f}")
PY
}
