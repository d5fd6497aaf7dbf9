#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), seeded from seeds/, after replaying
# every input fuzzing ever found (regressions/). A crash stops the run with its input saved
# under artifacts/TARGET/: copy it to regressions/TARGET/ with a name that says what it was,
# then fix it.
# Needs the nightly toolchain and cargo-fuzz (.ci/run installs both).
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
for target in tar zip detect paths; do
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
      -rss_limit_mb=1024 -timeout=10 -runs=1
  fi
  echo "== fuzz $target for ${seconds} s"
  # -rss_limit_mb: the readers must stay bounded; -timeout: no input may take ten seconds.
  # -a: debug assertions and overflow checks, so an overflow is a finding, not a wrap.
  cargo +nightly fuzz run --release -a "$target" "corpus/$target" "${seeds[@]}" -- \
    -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 2>&1 |
    grep -E '^(#[0-9]+ +DONE|==|stat::number_of_executed_units|stat::peak_rss_mb|.*(panicked|ERROR|SUMMARY|Test unit written))' || true
  if compgen -G "artifacts/$target/*" >/dev/null; then
    echo "fuzz $target found a failing input: $(ls artifacts/$target)" >&2
    exit 1
  fi
done
