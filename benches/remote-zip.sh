#!/usr/bin/env bash
# Usage: benches/remote-zip.sh [-n N] [--corpus botocore|torch|kernel] [DELAY_MS ...]
#                                                  (default: -n 3, botocore, delays 0 5 20)
#
# A zip at an http:// URL extracted into a folder: fastwrite reading it where it lives against
# the ways users do it today. The server is lab/range-server.py on a folder holding the wheel
# (fetch-corpus.sh: botocore, 2,039 files, 21 MB out; or torch, 906 MB, 11,269 entries of which
# 10,798 files, 1.75 GB out, one entry of 900 MB; or kernel, the Linux 6.1 source tree zipped
# by Info-ZIP's zip: many small files), answering byte ranges with ETags; a second one on the same folder
# with --no-ranges (every GET answered whole, 200, "Accept-Ranges: none"). In front of each, for
# each DELAY_MS, lab/delay-proxy.py holds every chunk DELAY_MS in each direction (a round trip
# is 2 x DELAY_MS; 0 still goes through the proxy, so every delay takes the same path). URL is
# the wheel through the first server's proxy:
#   fastwrite         fastwrite extract -q URL -o OUT  (a zip by ranged requests: its end
#                     first, then the rest 16 ranges at a time into a temporary file)
#   curl+fastwrite    curl -sS -o DL/WHEEL URL && fastwrite extract -q DL/WHEEL -o OUT  (DL a
#                     new folder each run, never deleted during the bench)
#   curl|bsdtar       curl -sS URL | bsdtar -xf - -C OUT  (bsdtar reads a zip as a stream)
#   ripunzip          ripunzip unzip-uri -d OUT URL  (ripunzip's ranged reads, its defaults)
#   fastwrite-stream  fastwrite extract -q URL2 -o OUT, URL2 the wheel through the --no-ranges
#                     server's own proxy at the same delay: fastwrite's fallback, the zip read
#                     as one stream while it writes
#   fastwrite-base    with FASTWRITE_BASE=BINARY: that build's `extract -q URL -o OUT`, to set a
#                     change beside the build before it (BENCH_TOOLS='fastwrite fastwrite-base')
#   curl              curl -sS -o DL/WHEEL URL: the download alone, which no client that
#                     writes can beat; checked by the file's size. With it the report says what
#                     each tool takes after the last byte (its median less the time the zip's
#                     bytes take at REMOTE_ZIP_SHARED_RATE, or without one less curl's), against a
#                     local extraction's time (curl+fastwrite's less curl's). One GET does not
#                     fill a shared link (the server is idle between its writes), so curl's time
#                     is above the link's
# N rounds per delay; within a round every tool runs once, round-robin, each round starting one
# tool further on, so no tool has its runs in a row. Every run writes into a fresh folder
# (OUT = out/DELAYms-rROUND-TOOL; nothing is deleted during the bench), under `timeout`. A run
# counts only if its exit status is 0 and OUT then holds exactly the wheel's files: the same
# names, each a regular file of the size the zip's central directory says (so their count and
# total size too); otherwise it is reported as FAILED and left out of the medians. Between
# runs: `sync`.
#
# Measured per run: wall time (bash's EPOCHREALTIME around the client); the client's CPU, user
# + system of the client process and every child it waited for (GNU time; for the pipelines
# all of them); the requests the servers answered (range-server.py's --stats: ranged, whole).
# Printed per delay: a table of medians of the good runs, with the ratios to fastwrite's (above
# 1: slower than fastwrite), and fastwrite / curl+fastwrite (below 1: reading the zip where it
# lives beats downloading it first). Requests as the servers count them: a HEAD counts as
# "whole" too (ripunzip's "whole 1" is its HEAD); fastwrite-stream's "whole 2" is its ranged GET
# of the zip's end answered whole, abandoned, then the whole zip again as one stream.
#
# Env:
#   BENCH_TOOLS            only these tools (names as above, space-separated)
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite, which must read
#                          http:// URLs: features cli, the default). The bench runs a copy of it (in the
#                          cache), so a rebuild during the bench changes nothing
#   RIPUNZIP               ripunzip binary (default: ripunzip in PATH, else
#                          $FASTWRITE_BENCH_CACHE/ripunzip/bin/ripunzip, installed there once
#                          with `cargo install ripunzip --locked --root ...` (~2 minutes); if
#                          that fails, ripunzip is left out, and the report says so)
#   REMOTE_ZIP_TIMEOUT     seconds a run may take before it is killed, and FAILED (default 600)
#   REMOTE_ZIP_SHARED_RATE bytes a second that each server sends in all, every connection
#                          sharing them (range-server.py --shared-rate: a link that is itself the
#                          limit, as a home line or a cross-region link); unset, no limit
#   REMOTE_ZIP_RATE        bytes a second that each connection gets (range-server.py --rate: a
#                          long or lossy way, where more connections carry more); unset, no limit
#   FASTWRITE_BENCH_CACHE, BENCH_SETTLE, BENCH_PROBE_MS, BENCH_SETTLE_MAX, BENCH_DROP_CACHES,
#   KEEP_WORK=1, BOTOCORE_VERSION: as in s3.sh and fetch-corpus.sh.
# Needs: python3, curl, bsdtar (libarchive-tools), GNU time, cargo (for ripunzip, once).
# Time: botocore, -n 3 at 0 5 20 ms: 44 s here (0.2-0.6 s a run; the fetch of the corpus and
# the install of ripunzip, ~4 minutes on 2 cores, not counted). Torch, -n 2 at 20 ms: 2.5
# minutes (8-20 s a run, curl|bsdtar the slowest; plus the `sync` of 1.75 GB after each).
# Disk: every run's output stays until the end: botocore 21 MB a run (1.5 GB at N=3 and three
# delays, with curl+fastwrite's downloads); torch 1.75 GB a run, and curl+fastwrite's download
# 0.9 GB more (~9.7 GB a round: 19 GB at -n 2).
#
# Results (markdown + the raw runs as TSV) go to $FASTWRITE_BENCH_CACHE/results/remote-zip-*,
# never the repo.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"

RUNS=3 CORPUS=botocore
usage="usage: benches/remote-zip.sh [-n N] [--corpus botocore|torch|kernel] [DELAY_MS ...]"
while (( $# )); do
    case "$1" in
    -n | --runs) RUNS="${2:?-n needs a number}"; shift 2 ;;
    -n*) RUNS="${1#-n}"; shift ;;
    --corpus) CORPUS="${2:?--corpus needs botocore, torch or kernel}"; shift 2 ;;
    --corpus=*) CORPUS="${1#--corpus=}"; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    -*) echo "remote-zip: unknown option $1 ($usage)" >&2; exit 2 ;;
    *) break ;;
    esac
done
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || { echo "remote-zip: -n wants a positive number, not '$RUNS'" >&2; exit 2; }
[[ "$CORPUS" =~ ^(botocore|torch|kernel)$ ]] || { echo "remote-zip: --corpus is botocore, torch or kernel, not '$CORPUS'" >&2; exit 2; }
DELAYS=("$@")
((${#DELAYS[@]})) || DELAYS=(0 5 20)
for d in "${DELAYS[@]}"; do
    [[ "$d" =~ ^[0-9]+$ ]] || { echo "remote-zip: a delay is whole milliseconds, not '$d'" >&2; exit 2; }
done

bench_lock  # one bench at a time on this machine
CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
TIMEOUT="${REMOTE_ZIP_TIMEOUT:-600}"
ALL_TOOLS=(fastwrite curl+fastwrite "curl|bsdtar" ripunzip fastwrite-stream curl ${FASTWRITE_BASE:+fastwrite-base})
TOOLS=()
for t in "${ALL_TOOLS[@]}"; do
    if [[ -z "${BENCH_TOOLS:-}" || " $BENCH_TOOLS " == *" $t "* ]]; then TOOLS+=("$t"); fi
done
for t in ${BENCH_TOOLS:-}; do
    [[ " ${ALL_TOOLS[*]} " == *" $t "* ]] || { echo "remote-zip: unknown tool '$t' in BENCH_TOOLS (${ALL_TOOLS[*]})" >&2; exit 2; }
done
wants() { [[ " ${TOOLS[*]} " == *" $1 "* ]]; }
drop_tool() {  # drop_tool TOOL
    local t kept=()
    for t in "${TOOLS[@]}"; do [[ "$t" == "$1" ]] || kept+=("$t"); done
    TOOLS=("${kept[@]}")
}

# --- the tools --------------------------------------------------------------------------------
need() { command -v "$1" >/dev/null || { echo "remote-zip: $1 is required ($2)" >&2; exit 1; }; }
[[ -x /usr/bin/time ]] || { echo "remote-zip: GNU time (/usr/bin/time) is required (apt-get install -y time)" >&2; exit 1; }
need python3 "python3"
need curl "apt-get install -y curl"
if wants "curl|bsdtar"; then need bsdtar "apt-get install -y libarchive-tools"; fi

# (One that cannot read a URL fails every fastwrite run: its help need not say it can.)
FW_SRC="$(resolve_fastwrite "$repo")"
fw_hash="$(sha256sum "$FW_SRC" | cut -c1-12)"
mkdir -p "$CACHE/bin"
FW="$CACHE/bin/fastwrite-$fw_hash"
[[ -x "$FW" ]] || { cp -- "$FW_SRC" "$FW.tmp" && mv -- "$FW.tmp" "$FW"; }
if wants fastwrite-base; then
    [[ -x "${FASTWRITE_BASE:-}" ]] || { echo "remote-zip: fastwrite-base needs FASTWRITE_BASE=BINARY" >&2; exit 2; }
    base_hash="$(sha256sum "$FASTWRITE_BASE" | cut -c1-12)"
    FW_BASE="$CACHE/bin/fastwrite-$base_hash"
    [[ -x "$FW_BASE" ]] || { cp -- "$FASTWRITE_BASE" "$FW_BASE.tmp" && mv -- "$FW_BASE.tmp" "$FW_BASE"; }
fi

# ripunzip: the one in PATH, else the one this bench installed in the cache (once).
NOTES=()
RIP=""
if wants ripunzip; then
    RIP="${RIPUNZIP:-$(command -v ripunzip || true)}"
    if [[ -z "$RIP" ]]; then
        RIP="$CACHE/ripunzip/bin/ripunzip"
        if [[ ! -x "$RIP" ]]; then
            echo "remote-zip: installing ripunzip into $CACHE/ripunzip (cargo install, once)" >&2
            if ! cargo install ripunzip --locked --root "$CACHE/ripunzip" >"$CACHE/ripunzip-install.log" 2>&1; then
                echo "remote-zip: cargo install ripunzip failed (see $CACHE/ripunzip-install.log): ripunzip left out" >&2
                NOTES+=("ripunzip left out: \`cargo install ripunzip --locked\` failed")
                RIP=""
            fi
        fi
    fi
    if [[ -n "$RIP" ]] && ! "$RIP" --help 2>&1 | grep -q 'unzip-uri'; then
        echo "remote-zip: $RIP has no unzip-uri command: ripunzip left out" >&2
        NOTES+=("ripunzip left out: $RIP has no unzip-uri")
        RIP=""
    fi
    [[ -n "$RIP" ]] || drop_tool ripunzip
fi
((${#TOOLS[@]})) || { echo "remote-zip: no tools (BENCH_TOOLS='${BENCH_TOOLS:-}')" >&2; exit 2; }

# --- the corpus -------------------------------------------------------------------------------
WHEEL_SRC="$("$here/fetch-corpus.sh" "$CORPUS")"
WHEEL_NAME="$(basename "$WHEEL_SRC")"
stamp="$(date +%Y%m%d-%H%M%S)"
WORK="$CACHE/work/remote-zip-$stamp"
RESULTS="$CACHE/results"
SITE="$WORK/site"
mkdir -p "$SITE" "$WORK/out" "$WORK/dl" "$WORK/logs" "$RESULTS"
name="remote-zip-$CORPUS-$stamp"
TSV="$RESULTS/$name.tsv"
MD="$RESULTS/$name.md"
# The served folder holds the wheel itself (a hard link; the server refuses symlinks leaving it).
ln -- "$WHEEL_SRC" "$SITE/$WHEEL_NAME" 2>/dev/null || cp -- "$WHEEL_SRC" "$SITE/$WHEEL_NAME"
# What every run must leave: each file of the zip (not its folders), with its size.
python3 - "$SITE/$WHEEL_NAME" <<'PY' | LC_ALL=C sort >"$WORK/manifest.tsv"
import sys, zipfile
for i in zipfile.ZipFile(sys.argv[1]).infolist():
    if not i.is_dir():
        print(f"{i.filename}\t{i.file_size}")
PY
printf '%s\t%s\n' "$WHEEL_NAME" "$(stat -c %s "$SITE/$WHEEL_NAME")" >"$WORK/manifest-curl.tsv"
EXPECTED=$(wc -l <"$WORK/manifest.tsv")
EXPECTED_BYTES=$(awk -F'\t' '{ s += $2 } END { printf "%d", s }' "$WORK/manifest.tsv")
(( EXPECTED == $(cut -f1 "$WORK/manifest.tsv" | LC_ALL=C sort -u | wc -l) )) ||
    { echo "remote-zip: $WHEEL_NAME names a file twice: cannot check outputs by name" >&2; exit 1; }

# --- the servers ------------------------------------------------------------------------------
PIDS=()
on_exit() {
    local rc=$? pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
    if (( rc != 0 )); then echo "remote-zip: failed (exit $rc); outputs and logs kept in $WORK" >&2; fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
stop() {  # stop PID: stop one of our servers or proxies
    local pid kept=()
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for pid in "${PIDS[@]}"; do [[ "$pid" == "$1" ]] || kept+=("$pid"); done
    PIDS=("${kept[@]}")
}

# start_server NAME ARGS...: lab/range-server.py on SITE (counts into WORK/NAME.json), its port
# into PORT.
start_server() {
    local tag="$1" out="$WORK/$1.out" pid
    shift
    echo '{}' >"$WORK/$tag.json"
    python3 "$repo/lab/range-server.py" "$SITE" --stats "$WORK/$tag.json" \
        ${REMOTE_ZIP_SHARED_RATE:+--shared-rate "$REMOTE_ZIP_SHARED_RATE"} \
        ${REMOTE_ZIP_RATE:+--rate "$REMOTE_ZIP_RATE"} "$@" </dev/null >"$out" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    PORT=""
    for _ in $(seq 100); do
        PORT="$(sed -n 's/^listening on \([0-9]*\)$/\1/p' "$out")"
        [[ -n "$PORT" ]] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n "$PORT" ]] || { echo "remote-zip: lab/range-server.py did not start:" >&2; cat "$out" >&2; exit 1; }
}

# start_proxy TARGET_PORT DELAY: lab/delay-proxy.py on a free port (it says nothing: it is up
# when a connection to it goes through to the server and back); its port into PORT, its pid
# into PROXY.
start_proxy() {
    local target="$1" delay="$2" pid
    for _ in 1 2 3 4 5; do
        PORT="$(free_port)"
        python3 "$repo/lab/delay-proxy.py" "$PORT" "$target" "$delay" </dev/null >"$WORK/proxy-$PORT.out" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            if ! kill -0 "$pid" 2>/dev/null; then break; fi
            if curl -sf -o /dev/null -I "http://127.0.0.1:$PORT/$WHEEL_NAME" 2>/dev/null; then
                PIDS+=("$pid")
                PROXY="$pid"
                return 0
            fi
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "remote-zip: lab/delay-proxy.py did not start:" >&2
    cat "$WORK/proxy-$PORT.out" >&2
    exit 1
}

start_server ranged
RANGED_PORT="$PORT"
start_server whole --no-ranges
WHOLE_PORT="$PORT"

versions="fastwrite $("$FW" --version | awk '{ print $2 }') (sha256 $fw_hash; repo at $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?'))"
versions+=", $(curl --version | sed -n '1s/^\(curl [^ ]*\).*/\1/p')"
if wants "curl|bsdtar"; then versions+=", $(bsdtar --version | sed -n '1s/ *zlib.*//p')"; fi
[[ -n "$RIP" ]] && versions+=", ripunzip $("$RIP" --version 2>/dev/null | awk '{ print $NF; exit }')"
versions+=", $(python3 --version) (servers, proxies)"
echo "remote-zip: $versions" >&2
echo "remote-zip: $WHEEL_NAME ($EXPECTED files, $EXPECTED_BYTES bytes out); servers 127.0.0.1:$RANGED_PORT (ranges), :$WHOLE_PORT (--no-ranges); $RUNS round(s) at ${DELAYS[*]} ms" >&2
for note in "${NOTES[@]}"; do echo "remote-zip: NOTE: $note" >&2; done

# --- one run ----------------------------------------------------------------------------------
tool_cmd() {  # tool_cmd TOOL OUT DL: the command into CMD
    local tool="$1" out="$2" dl="$3"
    case "$tool" in
    fastwrite) CMD=("$FW" extract -q "$URL" -o "$out") ;;
    fastwrite-base) CMD=("$FW_BASE" extract -q "$URL" -o "$out") ;;
    curl+fastwrite)
        # shellcheck disable=SC2016  # expanded by the inner bash
        CMD=(bash -c 'mkdir -p -- "$3" && curl -sS -o "$3/$4" "$1" && exec "$5" extract -q "$3/$4" -o "$2"'
            _ "$URL" "$out" "$dl" "$WHEEL_NAME" "$FW") ;;
    "curl|bsdtar")
        # shellcheck disable=SC2016  # expanded by the inner bash
        CMD=(bash -c 'set -o pipefail; mkdir -p -- "$2" && curl -sS "$1" | bsdtar -xf - -C "$2"' _ "$URL" "$out") ;;
    ripunzip) CMD=("$RIP" unzip-uri -d "$out" "$URL") ;;
    fastwrite-stream) CMD=("$FW" extract -q "$URL_WHOLE" -o "$out") ;;
    # shellcheck disable=SC2016  # expanded by the inner bash
    curl) CMD=(bash -c 'mkdir -p -- "$2" && curl -sS -o "$2/$3" "$1"' _ "$URL" "$dl" "$WHEEL_NAME") ;;
    esac
}

printf 'delay_ms\tround\tslot\ttool\tout\texit\tstatus\twall_s\tuser_s\tsys_s\tmaxrss_kib\tfiles\tbytes\trequests\n' >"$TSV"

run_one() {  # run_one DELAY ROUND SLOT TOOL
    local delay="$1" round="$2" slot="$3" tool="$4" id out dl rc t0 t1 times line manifest
    id="${delay}ms-r$round-${tool//[|+]/-}"
    out="$WORK/out/$id" dl="$WORK/dl/$id"
    tool_cmd "$tool" "$out" "$dl"
    manifest="$WORK/manifest.tsv"
    # The download alone leaves the zip itself: that is what is checked.
    [[ "$tool" == curl ]] && out="$dl" manifest="$WORK/manifest-curl.tsv"
    sync  # the previous run's writes land now, untimed
    cp -- "$WORK/ranged.json" "$WORK/logs/$id.ranged-before.json"
    cp -- "$WORK/whole.json" "$WORK/logs/$id.whole-before.json"
    t0=$EPOCHREALTIME
    if /usr/bin/time -f '%U %S %M' -o "$WORK/logs/$id.time" timeout -k 10 "$TIMEOUT" "${CMD[@]}" \
        </dev/null >"$WORK/logs/$id.log" 2>&1; then rc=0; else rc=$?; fi
    t1=$EPOCHREALTIME
    sleep 0.2  # the servers write their counts after each answer
    cp -- "$WORK/ranged.json" "$WORK/logs/$id.ranged-after.json"
    cp -- "$WORK/whole.json" "$WORK/logs/$id.whole-after.json"
    times="$(tail -n 1 "$WORK/logs/$id.time")"  # a failed run has a line before it
    python3 - "$manifest" "$out" "$rc" "$WORK/logs/$id" \
        "$delay" "$round" "$slot" "$tool" "$t0" "$t1" "$times" >>"$TSV" <<'PY'
import json, os, stat, sys
manifest, out, rc, logs, delay, rnd, slot, tool, t0, t1, times = sys.argv[1:]
want = dict(l.rstrip("\n").split("\t") for l in open(manifest))
got, other = {}, 0
for d, dirs, files in os.walk(out):
    for n in files:  # os.walk lists symlinks to folders as folders: count those too
        p = os.path.join(d, n)
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode):
            got[os.path.relpath(p, out)] = str(st.st_size)
        else:
            other += 1
    other += sum(1 for n in dirs if os.path.islink(os.path.join(d, n)))
missing = sum(1 for k in want if k not in got)
extra = sum(1 for k in got if k not in want)
sizes = sum(1 for k in want if k in got and got[k] != want[k])
total = sum(int(s) for s in got.values())
req = {}
for server in ("ranged", "whole"):
    def load(path):
        try:
            return json.load(open(path))
        except (OSError, ValueError):
            return {}
    a, b = load(f"{logs}.{server}-before.json"), load(f"{logs}.{server}-after.json")
    for k in ("ranged", "whole", "precondition"):
        n = b.get(k, 0) - a.get(k, 0)
        if n:
            req[k] = req.get(k, 0) + n
problems = []
if rc != "0":
    problems.append(f"exit {rc}" + (" (timeout)" if rc in ("124", "137") else ""))
if not os.path.isdir(out):
    problems.append("no output folder")
elif len(got) != len(want) or missing or extra or sizes or other:
    problems.append(f"{len(got)} files ({total} bytes), expected {len(want)} "
                    f"({sum(int(s) for s in want.values())} bytes): {missing} missing, {extra} extra, "
                    f"{sizes} of another size, {other} not regular files")
status = "ok" if not problems else "FAILED: " + "; ".join(problems)
user, system, rss = (times.split() + ["", "", ""])[:3]
print("\t".join([delay, rnd, slot, tool, os.path.basename(out), rc, status,
                 f"{float(t1) - float(t0):.3f}", user, system, rss, str(len(got)), str(total),
                 json.dumps(req, separators=(",", ":"))]))
PY
    line="$(tail -n 1 "$TSV")"
    printf 'remote-zip: %5s ms round %s %-16s %7.2f s  client CPU %5.2f s  %s\n' "$delay" "$round" "$tool" \
        "$(cut -f8 <<<"$line")" "$(awk -F'\t' '{ print $9 + $10 }' <<<"$line")" "$(cut -f7 <<<"$line")" >&2
}

# --- the rounds -------------------------------------------------------------------------------
wait_for_fast_creates "$WORK"  # every run creates the wheel's files: wait out recent deletes
free_memory_for_batch "$SITE/$WHEEL_NAME"
cat -- "$SITE/$WHEEL_NAME" >/dev/null
for delay in "${DELAYS[@]}"; do
    start_proxy "$RANGED_PORT" "$delay"
    URL="http://127.0.0.1:$PORT/$WHEEL_NAME" P1="$PROXY"
    start_proxy "$WHOLE_PORT" "$delay"
    URL_WHOLE="http://127.0.0.1:$PORT/$WHEEL_NAME" P2="$PROXY"
    echo "remote-zip: ${delay} ms each way ($URL, and $URL_WHOLE without ranges)" >&2
    warn_if_busy
    for ((round = 1; round <= RUNS; round++)); do
        for ((i = 0; i < ${#TOOLS[@]}; i++)); do  # round-robin, each round one tool further on
            run_one "$delay" "$round" "$((i + 1))" "${TOOLS[(round - 1 + i) % ${#TOOLS[@]}]}"
        done
    done
    stop "$P1"
    stop "$P2"
done
failed=0
if grep -q $'\tFAILED' "$TSV"; then failed=1; fi

# --- the report -------------------------------------------------------------------------------
{
    python3 - "$TSV" "$WHEEL_NAME" "$EXPECTED" "$EXPECTED_BYTES" "$(stat -c %s "$SITE/$WHEEL_NAME")" \
        "$RUNS" "$versions" "${NOTES[@]}" <<'PY'
import collections, datetime, json, os, statistics, sys
tsv, wheel, expected, expected_bytes, zip_bytes, runs, versions, *notes = sys.argv[1:]
expected, runs = int(expected), int(runs)
cols = ["delay", "round", "slot", "tool", "out", "exit", "status", "wall", "user", "sys", "rss",
        "files", "bytes", "requests"]
rows = [dict(zip(cols, l.rstrip("\n").split("\t"))) for l in list(open(tsv))[1:]]
print(f"Remote zip: {versions}; {datetime.date.today()}, {os.cpu_count()} cores, "
      f"{os.uname().release}. {wheel} ({int(zip_bytes) / 1e6:.1f} MB; {expected:,} files, "
      f"{int(expected_bytes) / 1e6:.1f} MB out) from lab/range-server.py over HTTP/1.1 through "
      "lab/delay-proxy.py, into a fresh folder each run, "
      f"{runs} round(s), tools round-robin. Median of the good runs; ratio = the tool's / "
      "fastwrite's (above 1: slower than fastwrite); client CPU = user + system of the client "
      "and its children; requests = per run, as the servers counted them (the first good run's; "
      "ranged: 206, whole: 200).")
shared, each = os.environ.get("REMOTE_ZIP_SHARED_RATE"), os.environ.get("REMOTE_ZIP_RATE")
link = [f"{float(shared) / 1e6:g} MB/s shared by every connection"] if shared else []
link += [f"{float(each) / 1e6:g} MB/s a connection"] if each else []
print(f"\nLink: {', '.join(link) or 'no limit but the machine'}.")
for n in notes:
    print(f"\nNote: {n}.")
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
                walls=[float(r["wall"]) for r in good],
                req=json.loads(good[0]["requests"]), n=len(good), of=len(rs))
    fw = med.get("fastwrite")
    print(f"\n### {delay} ms each way (round trip {2 * int(delay)} ms)\n")
    print("| tool | good runs | wall (median) | / fastwrite | runs | client CPU | / fastwrite | requests per run |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    for tool in order:
        if tool not in by:
            continue
        cell = tool.replace("|", "\\|")  # curl|bsdtar, in a markdown table
        if tool not in med:
            print(f"| {cell} | 0 of {len(by[tool])} | FAILED | | | | | |")
            continue
        m = med[tool]
        ratio = f"{m['wall'] / fw['wall']:.2f}" if fw else "-"
        cratio = f"{m['cpu'] / fw['cpu']:.2f}" if fw and fw["cpu"] else "-"
        req = ", ".join(f"{k} {v}" for k, v in sorted(m["req"].items(), key=lambda kv: -kv[1])) or "-"
        walls = " ".join(f"{w:.2f}" for w in m["walls"])
        print(f"| {cell} | {m['n']} of {m['of']} | {m['wall']:.2f} s | {ratio} | {walls} "
              f"| {m['cpu']:.2f} s | {cratio} | {req} |")
    cf = med.get("curl+fastwrite")
    if fw and cf:
        print(f"\nfastwrite / curl+fastwrite: {fw['wall'] / cf['wall']:.2f} "
              f"({fw['wall']:.2f} s / {cf['wall']:.2f} s)")
    # When the last byte came: at the earliest, when the link could have carried the zip (a
    # shared rate); else when curl's one GET had it.
    dl = med.get("curl")
    floor, floor_said = None, ""
    if shared:
        floor = int(zip_bytes) / float(shared)
        floor_said = f"the zip's bytes at the shared rate, {floor:.2f} s"
    elif dl:
        floor, floor_said = dl["wall"], f"curl's {dl['wall']:.2f} s"
    if floor is not None and dl and cf:
        local = cf["wall"] - dl["wall"]
        print(f"\nAfter the last byte (a tool's median less {floor_said}), against a local "
              f"extraction's {local:.2f} s (curl+fastwrite's less curl's):\n")
        for tool in order:
            if tool in med and tool not in ("curl", "curl+fastwrite", "curl|bsdtar"):
                after = med[tool]["wall"] - floor
                rip = med.get("ripunzip")
                of_rip = f"; {after / rip['wall']:.2f} of ripunzip's total" if rip else ""
                print(f"- {tool}: {after:.2f} s, {after / local:.2f} of a local extraction{of_rip}")
bad = [r for r in rows if r["status"] != "ok"]
if bad:
    print("\nFailed runs:\n")
    for r in bad:
        print(f"- {r['delay']} ms, round {r['round']}, {r['tool']} (out/{r['out']}): {r['status']}")
PY
} | tee "$MD"
echo
echo "results: $MD"
echo "         $TSV"

# --- cleanup (only now: deleting during the bench would slow the runs' file creation) ---------
trap - EXIT
on_exit
if (( failed )); then
    echo "remote-zip: some runs FAILED (see above); outputs and logs kept in $WORK" >&2
    exit 1
fi
if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    echo "outputs kept in $WORK" >&2
else
    cleanup_workdir "$WORK"
fi
