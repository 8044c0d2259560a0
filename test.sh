#!/usr/bin/env bash
# Quick start, step 2: build with warnings as errors and run the whole test suite, then again
# under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh --tests   # GoogleTest, Slurm and munge as well (setup.sh skips them)
jobs=$(nproc)
run_suite() {  # build-dir, extra cmake args...
  local dir=$1; shift
  cmake -S . -B "$dir" -G Ninja -DCPSIM_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs"
  # The real-Slurm test starts daemons: it runs once, in its own stage below.
  (cd "$dir" && ctest -j"$jobs" -LE slurm --output-on-failure --timeout 300)
}
# Optimised (-O2) without -g: the compile is about 30 % cheaper than RelWithDebInfo
# (cmd_plan.cpp: 15.4 s of CPU at -O2 against 23.1 s at -O2 -g on this 2-core machine), which
# keeps test.sh inside its 20-minute budget. -O2, not Release's -O3: GCC 12 at -O3 raises a
# false -Werror=restrict inside std::string's operator+ (GCC bug 105651).
# The CUDA kernels (when nvcc exists) for sm_90 only: every .cu still compiles with -Werror, at
# half the nvcc time of sm_80 + sm_90 (about 14 s a file per architecture here); no test runs them
# without a GPU, and the code has no per-architecture branch.
echo "== tests (-O2, -Werror)"
run_suite build-test -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_CUDA_ARCHITECTURES=90
echo "== validation: predictions against public measurements (validation/, tools/validate.py)"
python3 tools/validate.py build-test/cpsim
echo "== tests under ASan + UBSan"
# The CUDA kernels were compiled in the Release stage; nvcc's device code is not sanitised.
# -Og -g1, not Debug's -O0 -g: the tests' run time under ASan is dominated by unoptimised code,
# and -Og compiles cheaper than the -O1 the ASan documentation suggests (cpsim_app's largest
# unity batch: 26.7 s against 36.4 s; the whole stage's compile 420 s of CPU against 521 s)
# for a suite ~8 % slower (157 s against 146 s). -g1 keeps the line tables the reports need,
# and no -DNDEBUG, so the asserts stay on as in Debug.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite build-asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-Og -g1" \
  -DCPSIM_SANITIZE=ON -DCPSIM_CUDA=OFF
echo "== fuzz the loaders (libFuzzer + ASan + UBSan, 30 s in total)"
if echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long){return 0;}' |
    clang++ -fsanitize=fuzzer -x c++ - -o /dev/null >/dev/null 2>&1; then
  # The loaders here; argv's libFuzzer build is the whole simulator under clang (about 10 min
  # on 2 cores, over this script's budget): its seeds and regressions replay under ASan above
  # (ctest fuzz_regressions_argv), and `fuzz/run.sh build-fuzz 300 argv` fuzzes it.
  FUZZ_BUILD_JOBS=$jobs fuzz/run.sh build-fuzz 30 scenario platform model sweep profile
else
  echo "fuzz: skipped (no clang++ with libFuzzer; the regression cases ran above as ctest fuzz_regressions_*)"
fi
# The 200-point timing (--bench) is a benchmark, printed and never checked: bench/run.sh runs it.
echo "== Slurm: a one-node cluster on localhost (sweep --slurm, --merge, --resume)"
slurm_rc=0
tests/slurm/run_slurm_test.sh build-test/cpsim || slurm_rc=$?
[ "$slurm_rc" -eq 0 ] || [ "$slurm_rc" -eq 77 ] || exit "$slurm_rc"
