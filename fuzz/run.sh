#!/usr/bin/env bash
# Builds the fuzz targets (the loaders, and argv: the whole command line) with clang's libFuzzer
# (+ ASan + UBSan), replays their regression cases, then fuzzes each target for TOTAL_SECONDS / 6
# from a seed corpus of the bundled files. Fails on any finding; the input that caused it is left in
# BUILD_DIR/fuzz-artifacts/<target>/ (fix the bug, then keep the input in fuzz/regressions/).
#   fuzz/run.sh [BUILD_DIR] [TOTAL_SECONDS] [TARGET...]     (default: build-fuzz 60, all six)
# Inputs that found new coverage accumulate in BUILD_DIR/fuzz-corpus/<target>/ across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
total=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scenario platform model sweep profile argv)
jobs=${FUZZ_BUILD_JOBS:-$(nproc)}

# The libraries and the targets are built, instrumented (no tests). -O1 with line tables only
# (the findings' stack traces need no more): cheaper to compile than RelWithDebInfo's -O2 -g.
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" \
  -DCPSIM_FUZZ=ON -DCPSIM_TESTS=OFF -DCPSIM_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "${targets[@]/#/fuzz_}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

seeds() {  # the seed corpus directories of a target (the regression cases among them)
  case $1 in
    scenario) echo scenarios tests/scenario/data ;;
    platform) echo platforms ;;
    model) echo scenarios/models ;;
    sweep) echo sweeps tests/scenario/data ;;
    profile) echo kernels/profiles tests/scenario/data ;;
    argv) echo fuzz/seeds/argv ;;
  esac
  echo "fuzz/regressions/$1"
}
dict() { case $1 in profile | argv) echo "fuzz/dicts/$1.dict" ;; *) echo fuzz/dicts/yaml.dict ;; esac; }

per_target=$(( total / ${#targets[@]} ))
[ "$per_target" -ge 1 ] || per_target=1
failed=()
for t in "${targets[@]}"; do
  bin="$build/fuzz/fuzz_$t"
  mkdir -p "$build/fuzz-corpus/$t" "$build/fuzz-artifacts/$t" "$build/fuzz-logs"
  log="$build/fuzz-logs/$t.log"
  # shellcheck disable=SC2046
  if "$bin" -runs=0 -timeout=10 $(seeds "$t") >"$log.replay" 2>&1; then :; else
    echo "fuzz_$t: a regression case or seed fails:"; tail -n 30 "$log.replay"; failed+=("$t"); continue
  fi
  # shellcheck disable=SC2046
  if "$bin" -max_total_time="$per_target" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -dict="$(dict "$t")" -artifact_prefix="$(realpath "$build")/fuzz-artifacts/$t/" \
       "$build/fuzz-corpus/$t" $(seeds "$t") >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    corpus=$(find "$build/fuzz-corpus/$t" -type f | wc -l)
    echo "fuzz_$t: ${runs:-?} inputs in ${per_target} s, no finding (corpus $corpus)"
  else
    echo "fuzz_$t: FINDING (log $log, input in $build/fuzz-artifacts/$t/):"
    grep -E 'ERROR|SUMMARY|unexpected exception|check failed|runtime error|Test unit written' "$log" | head -n 20
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}"
  exit 1
fi
