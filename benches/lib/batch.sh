# shellcheck shell=bash
# One hyperfine batch of extractors side by side, verified (sourced by benches/*-peers.sh).
#
# The caller fills two arrays with `add NAME CMD...`, where each CMD extracts into $WORK/NAME,
# then calls `run_batch TAG EXPECTED_FILES REFERENCE ARCHIVE`. Every timed run writes into a fresh,
# never-used directory (lib/fresh-dir.sh as hyperfine's --prepare), nothing is deleted during
# the batch, every exit status must be 0, and every output tree must hold EXPECTED_FILES
# regular files and the same content as the REFERENCE tool's.
#
# Needs: lib/common.sh sourced, and $here, $WORK, $RESULTS, $RUNS, $WARMUP set.

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
    echo "bench: $1 not installed; skipping it" >&2
    return 1
}

reset_batch() { names=(); cmds=(); }

run_batch() {  # run_batch TAG EXPECTED_FILES REFERENCE ARCHIVE
    local tag="$1" expected="$2" reference="$3" archive="$4" stamp md json
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
    hyperfine "${args[@]}" "${cmds[@]}"
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
