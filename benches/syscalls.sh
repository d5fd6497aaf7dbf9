#!/usr/bin/env bash
# Usage: benches/syscalls.sh
#
# Counts the system calls each extractor makes on the benchmark wheel (see
# fetch-corpus.sh), with `strace -f -c`, and prints syscalls per extracted
# file, then fastwrite's busiest syscalls.  Syscall counts do not depend on
# timing noise, so this is a cheap, stable way to see where a tool does extra
# work per file (stat, mkdir, fchmod, utimensat, ...).
#
# Env:
#   FASTWRITE              fastwrite binary (default: target/release/fastwrite)
#   FASTWRITE_BENCH_CACHE  corpus and work dir (default ~/.cache/fastwrite-bench)
#   SYSCALLS_TOP           rows of fastwrite's per-syscall table to show (default 15)
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

command -v strace >/dev/null || { echo "syscalls: strace is required (apt-get install -y strace)" >&2; exit 1; }
FW="$(resolve_fastwrite "$repo")"
WHEEL="$("$here/fetch-corpus.sh")"
EXPECTED_FILES="$(unzip -Z1 "$WHEEL" | grep -vc '/$')"

WORK="$CACHE/work/syscalls-$(date +%Y%m%d-%H%M%S)"
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
        echo "syscalls: $name extracted $got files, expected $EXPECTED_FILES" >&2
        return 1
    fi
    names+=("$name")
}
have() {
    if command -v "$1" >/dev/null; then return 0; fi
    echo "syscalls: $1 not installed; skipping it" >&2
    return 1
}

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

# strace -c's last line is "100.00 SECONDS [USECS/CALL] CALLS [ERRORS] total";
# the calls column is the 4th field.
python3 - "$WORK" "$EXPECTED_FILES" "$TOP" "${names[@]}" <<'PY'
import sys
work, nfiles, top, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]

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
print(f"\nSyscalls per extracted file ({nfiles} files)")
print(f"{'tool':<26} {'syscalls':>9} {'failed':>7} {'per file':>9}")
for n in names:
    rows, total = data[n]
    failed = sum(e for _, e in rows.values())
    print(f"{n:<26} {total:>9} {failed:>7} {total / nfiles:>9.2f}")

for n in names:
    if not n.startswith("fastwrite"):
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
