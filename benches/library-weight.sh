#!/usr/bin/env bash
# What a program that only writes files pays to depend on fastwrite: a throwaway crate outside
# this repository depends on it with `default-features = false` (and on rayon), its main is
# examples/ufo.rs (a UFO font save, 2,300 glyphs), and it is built clean in release mode.
# Prints the crates it builds and the wall time of the clean build, then runs the save and
# counts what it wrote.
#
#   benches/library-weight.sh            measure and print
#   benches/library-weight.sh --check    also fail if it builds more than MAX_CRATES crates or
#                                        the save did not write every file (CI runs this; the
#                                        build time is printed, never asserted)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
check=false
[[ ${1:-} == --check ]] && check=true
MAX_CRATES=${MAX_CRATES:-30}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ufo/src"
cat > "$work/ufo/Cargo.toml" <<TOML
[package]
name = "ufo-save"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
fastwrite = { path = "$repo", default-features = false }
rayon = "1"

[workspace]
TOML
cp examples/ufo.rs "$work/ufo/src/main.rs"
# The versions this repository is tested with, where the program shares them.
cp Cargo.lock "$work/ufo/Cargo.lock"
cd "$work/ufo"

crates=$(cargo tree --offline -e normal --prefix none 2>/dev/null || cargo tree -e normal --prefix none)
crates=$(sed 's/ (\*)$//' <<<"$crates" | sort -u)
count=$(grep -vc '^ufo-save ' <<<"$crates")
echo "crates built for the program (its own not counted): $count"
sed 's/^/  /' <<<"$crates" | grep -v '^  ufo-save '

start=$(date +%s%N)
cargo build --release --quiet --offline 2>/dev/null || cargo build --release --quiet
ms=$((($(date +%s%N) - start) / 1000000))
printf 'clean release build: %d.%d s (%s cores)\n' $((ms / 1000)) $((ms % 1000 / 100)) "$(nproc)"

./target/release/ufo-save "$work/out.ufo" >"$work/stats.txt"
files=$(find "$work/out.ufo" -type f | wc -l)
# 6 property lists, 2,300 glyphs, a background layer for every tenth glyph.
expected=$((6 + 2300 + 230))
echo "UFO save: $files files written (expected $expected)"
grep -E '^(files|failed):' "$work/stats.txt" | sed 's/^/  /'

if $check; then
  status=0
  if ((count > MAX_CRATES)); then
    echo "library-weight: $count crates, more than $MAX_CRATES" >&2
    status=1
  fi
  if ((files != expected)); then
    echo "library-weight: the UFO save wrote $files files, not $expected" >&2
    status=1
  fi
  exit $status
fi
