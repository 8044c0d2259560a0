#!/usr/bin/env bash
# kernels/measure.sh [OUT_DIR]: everything a GPU machine runs for the cost model, in about 7
# minutes on one H100/H200-class GPU with 16 cores, most valuable first so a cut run still
# leaves complete files:
#   1. tools/bench_compute.py: GEMMs by shape (cuBLAS through PyTorch, BF16 and FP8 recipes),
#      the memory-bound kernels (norms, SwiGLU, RoPE, residual, loss, FP8 cast/transpose/amax,
#      the ring's LSE merge, AdamW) and the attention shapes the profile CSV cannot hold (MLA
#      192/128, the unfused math path), if PyTorch with CUDA is installed;
#   2. tools/bench_vendor.py (PyTorch SDPA flash and cuDNN, FlexAttention) on
#      kernels/attention/shapes.csv;
#   3. build kernels/ as a project of its own (no SimGrid needed), CUDA for this GPU only;
#   4. the CPU tests, then the GPU tests (FlashAttention's error rule against the CPU reference);
#   5. flash2_bench over kernels/attention/shapes.csv.
# Writes into OUT_DIR (the argument, else $OUT, else ./out/kernel-profiles):
#   <gpu>-gemm-measured.csv, <gpu>-membound-measured.csv, <gpu>-attention-extra-measured.csv,
#   <gpu>-provenance.json    bench_compute's profiles and the GPU, driver, CUDA, library versions
#   flash2.csv, vendor.csv   each attention benchmark's profile (kernels/profiles CSV format)
#   <gpu>-measured.csv       the vendor rows, and <gpu>-<impl>-measured.csv one per attention
#                            implementation (tools/profiles_from_measure.py): copy them into
#                            kernels/profiles/ and the cost model's "auto" uses the first for
#                            that GPU (the fastest kernel per shape)
#   measure.log              steps, durations, the GPU, driver and clocks (not pinned)
#   build.log, tests.log, flash2_bench.log, vendor.log, compute.log (MEASURE_PACK=1 packs these
#   and the two attention CSVs into logs.tar.gz, for transports that bring back few files)
# Exit status 1 if the build, a test or a benchmark failed (later steps still run).
# Environment: MEASURE_BUDGET_S (default 440 s, all steps), BUILD_DIR, CPSIM_COMMIT, MEASURE_PACK.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-${OUT:-$root/out/kernel-profiles}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${BUILD_DIR:-$root/build-measure}
budget=${MEASURE_BUDGET_S:-440}
start=$(date +%s)
status=0

log() { echo "[measure +$(($(date +%s) - start))s] $*" | tee -a "$out/measure.log"; }
rows() { local n=0; [ -f "$1" ] && n=$(($(wc -l <"$1") - 1)); echo $((n > 0 ? n : 0)); }
# Seconds a step may take: its own cap, and never past the overall budget.
allow() {
  local left=$((budget - ($(date +%s) - start)))
  ((left < $1)) && echo $((left > 10 ? left : 10)) || echo "$1"
}

: >"$out/measure.log"
commit=${CPSIM_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -n "$(git -C "$root" status --porcelain -- kernels 2>/dev/null)" ]; then commit="$commit+dirty"; fi
export CPSIM_COMMIT=$commit
log "cpsim kernels at $commit -> $out"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
    --format=csv 2>&1 | tee -a "$out/measure.log"
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
else
  log "nvidia-smi not found"
  gpu_name=unknown
  cap=
fi
# "NVIDIA H100 80GB HBM3" -> h100: the key the cost model matches against GPU preset names.
slug=$(echo "$gpu_name" | tr '[:upper:]' '[:lower:]' | sed 's/^nvidia //' | awk '{print $1}')
slug=${slug:-gpu}
archs=${cap:-"80;90"}

# 1. GEMMs, memory-bound kernels, MLA and unfused attention.
log "bench_compute.py"
if command -v python3 >/dev/null; then
  compute_cap=$(allow 185)
  timeout "$compute_cap" python3 "$root/tools/bench_compute.py" --out-dir "$out" --gpu-key "$slug" \
    --commit "$commit" --gemm-seconds 100 --membound-seconds 35 --attention-seconds 30 \
    2>"$out/compute.log"
  rc=$?
  ((rc != 0 && rc != 3)) && status=1
  log "bench_compute exit $rc: $(rows "$out/$slug-gemm-measured.csv") GEMM rows, $(rows "$out/$slug-membound-measured.csv") memory-bound rows, $(rows "$out/$slug-attention-extra-measured.csv") attention rows (see compute.log)"
  grep -E "^bench_compute|blockwise FP8" "$out/compute.log" | tee -a "$out/measure.log"
else
  log "bench_compute skipped: no python3"
fi

# 2. Vendor attention kernels.
log "bench_vendor.py"
if command -v python3 >/dev/null; then
  vendor_cap=$(allow 95)
  timeout "$vendor_cap" python3 "$root/tools/bench_vendor.py" --out "$out/vendor.csv.part" \
    --commit "$commit" --max-seconds $((vendor_cap > 40 ? vendor_cap - 20 : 5)) 2>"$out/vendor.log"
  rc=$?
  case $rc in
    0) mv "$out/vendor.csv.part" "$out/vendor.csv"
       log "vendor: $(rows "$out/vendor.csv") rows" ;;
    3) rm -f "$out/vendor.csv.part"; log "vendor kernels skipped: $(tail -1 "$out/vendor.log")" ;;
    *) [ -s "$out/vendor.csv.part" ] && mv "$out/vendor.csv.part" "$out/vendor.csv"
       log "bench_vendor exit $rc (timeout 124; partial rows kept; see vendor.log)" ;;
  esac
else
  log "vendor kernels skipped: no python3"
fi

# 3. Build.
jobs=$(nproc 2>/dev/null || echo 8)
log "configure + build (CUDA architectures $archs, $jobs jobs)"
if timeout "$(allow 90)" bash -c "cmake -S '$root/kernels' -B '$build' -DCMAKE_BUILD_TYPE=Release \
      -DCPSIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES='$archs' $(command -v ninja >/dev/null && echo -G Ninja) \
    && cmake --build '$build' -j $jobs" >"$out/build.log" 2>&1; then
  log "build ok"
else
  log "BUILD FAILED (see build.log)"
  tail -20 "$out/build.log"
  status=1
fi
if [ ! -x "$build/flash2_bench" ]; then
  log "no flash2_bench (no CUDA compiler found by CMake, or the build failed): see build.log"
  status=1
else

  # 4. Tests: the CPU ones (seconds), then the GPU ones; their error figures go to tests.log.
  log "tests"
  if (cd "$build" && CPSIM_KERNELS_VERBOSE=1 timeout "$(allow 45)" \
        ctest -j "$jobs" --timeout 40 --output-on-failure -V) >"$out/tests.log" 2>&1; then
    log "tests ok: $(grep -c 'Passed' "$out/tests.log") passed"
  else
    status=1
    log "TESTS FAILED (see tests.log):"
    grep -E "\*\*\*Failed|Failed  |Timeout" "$out/tests.log" | head -20 | tee -a "$out/measure.log"
  fi
  grep -E "  (o|lse|dq|dk|dv|ring o|ring lse): kernel error" "$out/tests.log" >/dev/null &&
    log "error-rule figures: grep 'kernel error' tests.log"

  # 5. flash2 benchmark.
  log "flash2_bench"
  bench_cap=$(allow 55)
  timeout "$bench_cap" "$build/flash2_bench" --out "$out/flash2.csv" --commit "$commit" \
    --max-seconds $((bench_cap > 30 ? bench_cap - 25 : 5)) 2>"$out/flash2_bench.log"
  rc=$?
  ((rc != 0)) && status=1
  log "flash2_bench exit $rc, $(rows "$out/flash2.csv") rows (see flash2_bench.log)"
fi

# The attention profiles the cost model looks up, one per implementation (our kernel's apart).
if python3 "$root/tools/profiles_from_measure.py" "$out" "$slug" 2>>"$out/measure.log"; then
  log "attention profiles: $(cd "$out" && ls "$slug"-*measured.csv | grep -v -e gemm -e membound -e attention-extra | tr '\n' ' ')"
  log "copy $slug-*-measured.csv into kernels/profiles/ to use them"
else
  status=1
  log "no attention profile written (see measure.log)"
fi
if [ "${MEASURE_PACK:-0}" = 1 ]; then
  (cd "$out" && tar czf logs.tar.gz --remove-files $(ls build.log tests.log flash2_bench.log vendor.log \
     compute.log flash2.csv vendor.csv 2>/dev/null)) && log "logs packed into logs.tar.gz"
fi
log "done in $(($(date +%s) - start)) s, status $status"
exit $status
