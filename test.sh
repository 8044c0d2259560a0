#!/usr/bin/env bash
# Quick start, step 2: build with warnings as errors and run the whole test suite, then again
# under AddressSanitizer + UndefinedBehaviorSanitizer. The cheapest stages run first, so that a
# failure shows within minutes; each stage's time is printed as it ends and all of them at the
# end (the budget: 20 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")"
jobs=$(nproc)
stage_times=()
stage() {  # stage NAME COMMAND... -> runs it, prints and records its wall time
  local name=$1; shift
  local t0=$SECONDS
  echo "== $name"
  "$@"
  local line
  line=$(printf '%-58s %5d s' "$name" $((SECONDS - t0)))
  echo "== done: $line"
  stage_times+=("$line")
}
summary() {
  echo "== stage times (total $((SECONDS)) s)"
  local l
  for l in "${stage_times[@]}"; do echo "  $l"; done
}
trap summary EXIT

configure() {  # build-dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCPSIM_WERROR=ON "$@" >/dev/null
}
tests() {  # build-dir, ctest args... (the real-Slurm test starts daemons: its own stage below)
  local dir=$1; shift
  (cd "$dir" && ctest -j"$jobs" --output-on-failure --timeout 300 "$@")
}

stage "dependencies" scripts/install-deps.sh --tests   # GoogleTest, Slurm and munge as well
# Optimised (-O2) without -g: the compile is about 30 % cheaper than RelWithDebInfo
# (cmd_plan.cpp: 15.4 s of CPU at -O2 against 23.1 s at -O2 -g on a 2-core machine), which
# keeps test.sh inside its 20-minute budget. -O2, not Release's -O3: GCC 12 at -O3 raises a
# false -Werror=restrict inside std::string's operator+ (GCC bug 105651).
# The CUDA kernels (when nvcc exists) for sm_90 only: every .cu still compiles with -Werror, at
# half the nvcc time of sm_80 + sm_90 (about 14 s a file per architecture); no test runs them
# without a GPU, and the code has no per-architecture branch.
configure build-test -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_CUDA_ARCHITECTURES=90
stage "build (-O2, -Werror)" cmake --build build-test -j"$jobs"
stage "validation: predictions against public measurements" python3 tools/validate.py build-test/cpsim
# By label, cheapest first: the unit tests take seconds, the bundled scenarios' goldens minutes.
stage "unit tests (-O2)" tests build-test -L '^unit$'
stage "engine tests (-O2)" tests build-test -L '^engine$'
stage "integration tests: the binary end to end (-O2)" tests build-test -L '^integration$'
stage "golden outputs of the bundled scenarios (-O2)" tests build-test -L '^golden$'
# Every other label (invariants, docs, tools, and any added later): none is left out.
stage "invariants, tested docs and tools (-O2)" tests build-test -LE '^(unit|engine|integration|golden|slurm)$'
# The 200-point timing (--bench) is a benchmark, printed and never checked: bench/run.sh runs it.
slurm() {
  local rc=0
  tests/slurm/run_slurm_test.sh build-test/cpsim || rc=$?
  [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || return "$rc"
}
stage "Slurm: a one-node cluster on localhost (sweep --slurm, --merge, --resume)" slurm
fuzz() {
  if echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long){return 0;}' |
      clang++ -fsanitize=fuzzer -x c++ - -o /dev/null >/dev/null 2>&1; then
    # The loaders here; argv's libFuzzer build is the whole simulator under clang (about 10 min
    # on 2 cores, over this script's budget): its seeds and regressions replay under ASan below
    # (ctest fuzz_regressions_argv), and `fuzz/run.sh build-fuzz 300 argv` fuzzes it.
    FUZZ_BUILD_JOBS=$jobs fuzz/run.sh build-fuzz 30 scenario platform model sweep profile
  else
    echo "fuzz: skipped (no clang++ with libFuzzer; the regression cases run as ctest fuzz_regressions_*)"
  fi
}
stage "fuzz the loaders (libFuzzer + ASan + UBSan, 30 s in total)" fuzz
# Under ASan + UBSan last: its build is the most expensive stage. The CUDA kernels were compiled
# in the -O2 build; nvcc's device code is not sanitised. -Og -g1, not Debug's -O0 -g: the
# tests' run time under ASan is dominated by unoptimised code, and -Og compiles cheaper than
# the -O1 the ASan documentation suggests (cpsim_app's largest unity batch: 26.7 s against
# 36.4 s; the whole stage's compile 420 s of CPU against 521 s) for a suite ~8 % slower (157 s
# against 146 s). -g1 keeps the line tables the reports need, and no -DNDEBUG, so the asserts
# stay on as in Debug. The benchmark (bench/) is built in the -O2 stage only: it is never run
# under the sanitizers.
configure build-asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-Og -g1" \
  -DCPSIM_SANITIZE=ON -DCPSIM_CUDA=OFF -DCPSIM_BENCH=OFF
stage "build under ASan + UBSan" cmake --build build-asan -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
stage "tests under ASan + UBSan" tests build-asan -LE slurm
