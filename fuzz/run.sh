#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), seeded from seeds/, after replaying
# every input fuzzing ever found (regressions/). A crash stops the run with its input saved
# under artifacts/TARGET/: copy it to regressions/TARGET/ with a name that says what it was,
# then fix it.
# The targets are built once, then fuzzed JOBS at a time (FUZZ_JOBS, default: the cores; each
# fuzzer is one process on one core), each for its full SECONDS: side by side on 2 cores the
# four take two turns instead of four.
# Needs the nightly toolchain and cargo-fuzz (.ci/run installs both).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
jobs="${FUZZ_JOBS:-$(nproc)}"
targets=(tar zip detect paths)
# -a: debug assertions and overflow checks, so an overflow is a finding, not a wrap.
cargo +nightly fuzz build --release -a

# One target: its regressions replayed, then fuzzed; what it printed goes to logs/TARGET.
fuzz_one() {
  local target="$1" seeds
  case $target in
    tar) seeds=(seeds/tar) ;;
    zip) seeds=(seeds/zip) ;;
    *) seeds=(seeds/tar seeds/zip) ;;
  esac
  mkdir -p "corpus/$target"
  rm -rf "artifacts/$target"
  # First every input a fuzzer ever found (regressions/TARGET/), each run once under the same
  # limits: a fixed bug stays fixed.
  if compgen -G "regressions/$target/*" >/dev/null; then
    echo "== replay regressions/$target"
    cargo +nightly fuzz run --release -a "$target" regressions/"$target"/* -- \
      -rss_limit_mb=1024 -timeout=10 -runs=1 || return 1
  fi
  echo "== fuzz $target for ${seconds} s"
  # -rss_limit_mb: the readers must stay bounded; -timeout: no input may take ten seconds.
  cargo +nightly fuzz run --release -a "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 2>&1 |
    grep -E '^(#[0-9]+ +DONE|==|stat::number_of_executed_units|stat::peak_rss_mb|.*(panicked|ERROR|SUMMARY|Test unit written))' || true
  if compgen -G "artifacts/$target/*" >/dev/null; then
    echo "fuzz $target found a failing input: $(ls "artifacts/$target")" >&2
    return 1
  fi
}

mkdir -p logs
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  pids=()
  batch=("${targets[@]:i:jobs}")
  for target in "${batch[@]}"; do
    fuzz_one "$target" >"logs/$target" 2>&1 &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    if ! wait "${pids[j]}"; then failed+=("${batch[j]}"); fi
    cat "logs/${batch[j]}"
  done
done
if ((${#failed[@]})); then
  echo "fuzz: ${failed[*]} failed (see above; inputs under artifacts/)" >&2
  exit 1
fi
