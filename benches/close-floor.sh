#!/usr/bin/env bash
# Usage: benches/close-floor.sh [LATENCY_MS ...]   (default: 1 5 10)
#
# What hiding close latency costs on THIS machine, at best: the floor under close-lab.sh's
# "auto vs no latency" ratio. lab/floor.c models perfect deferral without a filesystem: writers
# spend fastwrite's CPU time per file, hand every "file" to a pool of close threads the way
# fastwrite does (batches of 8, one wake-up per batch, chained; as many threads as auto starts,
# by Little's law, at most 256, started before the first file, their start-up timed), and each close
# sleeps the emulated latency, as lab/slowclose.c does. Whatever the model takes over its run
# without latency is the price of the wake-ups, timers and context switches that thousands of
# slow closes cost here: fastwrite makes the same hand-overs, plus real files.
#
# Calibration: fastwrite extracts close-lab's small zip (2,000 files, generated once by
# close-lab.sh's corpus step, or here) 5 times without the preload library (hyperfine); its mean
# CPU time (user + system) per file is the model's work per file, spread over as many writers as
# fastwrite starts (one per CPU).
#
# Then one hyperfine run, side by side: the model without latency and at every LATENCY_MS, and
# fastwrite auto without the preload and at every LATENCY_MS (fresh output folder per run, exit
# status and file count checked). The report gives both ratios to the run without latency.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
source "$here/lib/common.sh"
bench_lock

unset LD_PRELOAD FASTWRITE_LAB_CLOSE_MS FASTWRITE_LAB_FAIL_CLOSE FASTWRITE_LAB_FAIL_EVERY
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
LATENCIES=("$@")
(( ${#LATENCIES[@]} )) || LATENCIES=(1 5 10)
RUNS="${BENCH_RUNS:-10}"
command -v hyperfine >/dev/null || { echo "close-floor: hyperfine is required (apt-get install -y hyperfine)" >&2; exit 1; }

FW="$(resolve_fastwrite "$repo")"
LAB="$("$repo/lab/build")"
FLOOR="$repo/target/lab/floor"
CORPUS="$CACHE/close-lab/small"
if [[ ! -e "$CORPUS/done" ]]; then
    echo "close-floor: generating close-lab's small corpus into $CORPUS" >&2
    python3 "$here/lib/gen-corpus.py" small "$CORPUS.part"
    mv "$CORPUS.part" "$CORPUS" && touch "$CORPUS/done"
fi
ARCHIVE="$CORPUS/corpus.zip"
read -r FILES _ <"$CORPUS/manifest"
WRITERS="$(nproc)"

WORK="$CACHE/work/close-floor-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$WORK/calibrate"
trap 'report_failure close-floor "$WORK"' EXIT

# --- calibrate: fastwrite's CPU time per file (hyperfine's user + system mean) ----------------
wait_for_fast_creates "$WORK"
hyperfine -N --warmup 1 --runs 5 --export-json "$WORK/calibrate.json" \
    --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/calibrate/out")" \
    "$(q "$FW") extract $(q "$ARCHIVE") -o $(q "$WORK/calibrate/out")" >/dev/null
WORK_US="$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["results"][0]; print(round((r["user"] + r["system"]) * 1e6 / int(sys.argv[2])))' "$WORK/calibrate.json" "$FILES")"
echo "close-floor: fastwrite takes ${WORK_US} us of CPU per file here (user + system, mean of 5 runs); model: $WRITERS writers, close threads by Little's law as auto sizes them" >&2

# --- one hyperfine run, side by side ---------------------------------------------------------
names=(floor@none) cmds=("$(q "$FLOOR") $FILES $WRITERS $WORK_US 0 0")
names+=(fw-auto@none) cmds+=("$(q "$FW") extract $(q "$ARCHIVE") -o")
for lat in "${LATENCIES[@]}"; do
    # As many close threads as fastwrite's auto would start (Little's law, + 1, at most 256).
    threads="$(awk -v w="$WRITERS" -v l="$lat" -v u="$WORK_US" 'BEGIN { t = w * l * 1000 / u; t = (t == int(t) ? t : int(t) + 1) + 1; print (t > 256 ? 256 : t) }')"
    names+=("floor@${lat}ms") cmds+=("$(q "$FLOOR") $FILES $WRITERS $WORK_US $lat $threads")
    names+=("fw-auto@${lat}ms") cmds+=("env $(q "LD_PRELOAD=$LAB") FASTWRITE_LAB_CLOSE_MS=$lat $(q "$FW") extract $(q "$ARCHIVE") -o")
done
args=(-N --warmup 1 --runs "$RUNS" --export-json "$WORK/floor.json")
for i in "${!names[@]}"; do
    cmd="${cmds[$i]}"
    if [[ "${names[$i]}" == fw-* ]]; then
        # fastwrite writes: a fresh folder per run, as in every bench here.
        args+=(--command-name "${names[$i]}" --prepare "$(q "$here/lib/fresh-dir.sh") $(q "$WORK/${names[$i]}")")
        cmd="$cmd $(q "$WORK/${names[$i]}")"
    else
        args+=(--command-name "${names[$i]}" --prepare true)
    fi
    cmds[i]="$cmd"
done
wait_for_fast_creates "$WORK"
warn_if_busy
hyperfine "${args[@]}" "${cmds[@]}"

# --- verify and report -----------------------------------------------------------------------
for n in "${names[@]}"; do
    [[ "$n" == fw-* ]] && BENCH_SYNC=0 "$here/lib/fresh-dir.sh" "$WORK/$n" --finish
done
python3 - "$WORK/floor.json" "$WORK" "$FILES" "$WORK_US" <<'PY'
import json, os, sys
path, work, files, work_us = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
res = {r["command"]: r for r in json.load(open(path))["results"]}
bad = 0
for name, r in res.items():
    if any(c != 0 for c in r.get("exit_codes", [])):
        print(f"VERIFY {name}: non-zero exit codes", file=sys.stderr); bad = 1
    if name.startswith("fw-"):
        runs = os.path.join(work, name + ".runs")
        for d in os.listdir(runs):
            n = sum(len(fs) for _, _, fs in os.walk(os.path.join(runs, d)))
            if n != files:
                print(f"VERIFY {name}: run {d}: {n} files, expected {files}", file=sys.stderr); bad = 1
if bad:
    sys.exit(1)
lats = [k.split("@")[1] for k in res if k.startswith("floor@")]
print(f"| {files} files, {work_us} us CPU each | " + " | ".join(lats) + " |")
print("|---|" + "---|" * len(lats))
for tool, label in (("floor", "floor model (ms)"), ("fw-auto", "fastwrite auto (ms)")):
    print(f"| {label} | " + " | ".join(f"{res[f'{tool}@{l}']['mean'] * 1e3:.0f}" for l in lats) + " |")
for tool, label in (("floor", "floor model vs no latency"), ("fw-auto", "fastwrite auto vs no latency")):
    base = res[f"{tool}@none"]["mean"]
    print(f"| {label} | " + " | ".join(f"{res[f'{tool}@{l}']['mean'] / base:.2f}x" for l in lats) + " |")
PY
