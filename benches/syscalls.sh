#!/usr/bin/env bash
# Usage: benches/syscalls.sh [zip|mirror]   (default: zip)
#
# Counts the system calls each tool makes, with `strace -f -c`, and prints
# syscalls per file, then fastwrite's busiest syscalls.  Syscall counts do not
# depend on timing noise, so this is a cheap, stable way to see where a tool
# does extra work per file (stat, mkdir, fchmod, utimensat, ...).
#   zip     each extractor on the benchmark wheel (see fetch-corpus.sh).
#   mirror  a fresh copy of a subtree of the kernel tree (fetch-trees.sh kernel;
#           fs/: 2,078 files) into an empty dir: `fastwrite mirror` against
#           `cp -a`, `rsync -a`, xcp and fcp, in the forms mirror-peers.sh uses;
#           every copy must have the source's file count and content.
#
# Env:
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite)
#   FASTWRITE_BENCH_CACHE  corpus and work dir (default ~/.cache/fastwrite-bench)
#   SYSCALLS_TOP           rows of fastwrite's per-syscall table to show (default 15)
#   SYSCALLS_DETAIL        regex: tools whose per-syscall table to show (default ^fastwrite)
#   MIRROR_SUBTREE         mirror: the kernel subtree to copy (default fs)
#   MIRROR_FASTWRITE=0     mirror: leave out fastwrite (peers only)
#   KEEP_WORK=1            keep strace summaries and outputs instead of deleting them
#
# Peer tools that are not installed are skipped with a message.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$here/lib/common.sh"
bench_lock  # one bench at a time on this machine

CACHE="${FASTWRITE_BENCH_CACHE:-$HOME/.cache/fastwrite-bench}"
TOP="${SYSCALLS_TOP:-15}"
DETAIL="${SYSCALLS_DETAIL:-^fastwrite}"
MODE="${1:-zip}"

command -v strace >/dev/null || { echo "syscalls: strace is required (apt-get install -y strace)" >&2; exit 1; }
case "$MODE" in
zip)
    FW="$(resolve_fastwrite "$repo")"
    WHEEL="$("$here/fetch-corpus.sh")"
    EXPECTED_FILES="$(unzip -Z1 "$WHEEL" | grep -vc '/$')"
    VERB=extracted
    ;;
mirror)
    FW=""
    if [[ "${MIRROR_FASTWRITE:-1}" != 0 ]]; then
        FW="$(resolve_fastwrite "$repo")"
        "$FW" mirror --help >/dev/null 2>&1 || {
            echo "syscalls: $FW has no mirror subcommand (or MIRROR_FASTWRITE=0 for the peers alone)" >&2
            exit 1
        }
    fi
    SRC="$("$here/fetch-trees.sh" kernel)/${MIRROR_SUBTREE:-fs}"
    [[ -d "$SRC" ]] || { echo "syscalls: no $SRC" >&2; exit 1; }
    EXPECTED_FILES="$(find "$SRC" -type f | wc -l)"
    VERB=copied
    ;;
*)
    echo "syscalls: unknown mode '$MODE' (zip or mirror)" >&2
    exit 2
    ;;
esac

WORK="$CACHE/work/syscalls-$MODE-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$WORK"
trap 'report_failure syscalls "$WORK"' EXIT

names=()
# trace NAME OUTDIR-PLACEHOLDER-CMD...: runs CMD under strace with every "@OUT@"
# word replaced by a fresh, never-used dir (pre-created: bsdtar -C needs it).
trace() {
    local name="$1" out="$WORK/$1.out" word cmd=()
    shift
    mkdir "$out"
    for word in "$@"; do cmd+=("${word//@OUT@/$out}"); done
    # -f: count all threads (fastwrite and ripunzip are multi-threaded);
    # -S calls: sort the summary by call count.  strace exits with the
    # tracee's status, so set -e stops us on a failed extraction.
    strace -f -c -S calls -o "$WORK/$name.strace" "${cmd[@]}" >/dev/null 2>"$WORK/$name.stderr" || {
        echo "syscalls: $name failed:" >&2
        cat "$WORK/$name.stderr" >&2
        return 1
    }
    local got
    got="$(find "$out" -type f | wc -l)"
    if (( got != EXPECTED_FILES )); then
        echo "syscalls: $name $VERB $got files, expected $EXPECTED_FILES" >&2
        return 1
    fi
    if [[ "$MODE" == mirror ]] && ! diff -rq --no-dereference "$SRC" "$out" >/dev/null; then
        echo "syscalls: $name: $out differs from $SRC" >&2
        return 1
    fi
    names+=("$name")
}
have() {
    if command -v "$1" >/dev/null; then return 0; fi
    echo "syscalls: $1 not installed; skipping it" >&2
    return 1
}

if [[ "$MODE" == zip ]]; then
    echo "syscalls: $WHEEL ($EXPECTED_FILES files), fastwrite = $FW" >&2
    trace fastwrite "$FW" extract "$WHEEL" -o @OUT@
    if "$FW" --help 2>&1 | grep -q -- '--no-defer-close'; then
        trace fastwrite-no-defer-close "$FW" --no-defer-close extract "$WHEEL" -o @OUT@
    else
        echo "syscalls: $FW has no --no-defer-close flag; skipping that variant" >&2
    fi
    trace unzip unzip -q "$WHEEL" -d @OUT@
    if have bsdtar; then trace bsdtar bsdtar -xf "$WHEEL" -C @OUT@; fi
    if have ripunzip; then trace ripunzip ripunzip unzip-file "$WHEEL" -d @OUT@; fi
    if have 7z; then trace 7z 7z x -y -o@OUT@ "$WHEEL"; fi
else
    # The same forms as mirror-peers.sh (which says why): each fills the empty @OUT@ with
    # SRC's contents.
    echo "syscalls: $SRC ($EXPECTED_FILES files), fastwrite = ${FW:-left out}" >&2
    tops=()
    while IFS= read -r -d '' e; do tops+=("$e"); done \
        < <(find "$SRC" -mindepth 1 -maxdepth 1 -print0 | sort -z)
    if [[ -n "$FW" ]]; then
        trace fastwrite "$FW" mirror "$SRC" @OUT@
        trace fastwrite-no-defer-close "$FW" --no-defer-close mirror "$SRC" @OUT@
    fi
    trace cp cp -a "$SRC/." @OUT@
    trace rsync rsync -a "$SRC/" @OUT@/
    if have xcp; then trace xcp xcp -r -T --no-progress "$SRC" @OUT@; fi
    if have fcp; then trace fcp fcp "${tops[@]}" @OUT@; fi
fi

# strace -c's last line is "100.00 SECONDS [USECS/CALL] CALLS [ERRORS] total";
# the calls column is the 4th field.
python3 - "$WORK" "$EXPECTED_FILES" "$TOP" "$VERB" "$DETAIL" "${names[@]}" <<'PY'
import re, sys
work, nfiles, top, verb, detail = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
names = sys.argv[6:]

def parse(name):
    """Return ({syscall: (calls, errors)}, total_calls) from a strace -c file."""
    rows, total = {}, None
    for line in open(f"{work}/{name}.strace"):
        f = line.split()
        if len(f) < 5 or not f[0][0].isdigit():
            continue  # header, separators, "strace: ..." notes
        calls = int(f[3])
        errors = int(f[4]) if len(f) == 6 else 0
        if f[-1] == "total":
            total = calls
        else:
            rows[f[-1]] = (calls, errors)
    if total is None:
        sys.exit(f"syscalls: no 'total' line in {name}.strace")
    return rows, total

data = {n: parse(n) for n in names}
print(f"\nSyscalls per {verb} file ({nfiles} files)")
print(f"{'tool':<26} {'syscalls':>9} {'failed':>7} {'per file':>9}")
for n in names:
    rows, total = data[n]
    failed = sum(e for _, e in rows.values())
    print(f"{n:<26} {total:>9} {failed:>7} {total / nfiles:>9.2f}")

for n in names:
    if not re.search(detail, n):
        continue
    rows = sorted(data[n][0].items(), key=lambda kv: -kv[1][0])
    print(f"\n{n}: top {top} syscalls")
    print(f"{'syscall':<20} {'calls':>8} {'errors':>7} {'per file':>9}")
    for sc, (calls, errors) in rows[:top]:
        print(f"{sc:<20} {calls:>8} {errors:>7} {calls / nfiles:>9.2f}")
PY

if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    echo "strace summaries and outputs kept in $WORK" >&2
else
    cleanup_workdir "$WORK"
fi
