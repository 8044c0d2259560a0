#!/usr/bin/env bash
# Scale and speed benchmarks. Not a test: prints wall time, peak memory and simulated
# ops per second for the four targets, then how wall time and memory grow with GPUs and with
# sequence length. Writes bench/results/*.csv and plots them to docs/gallery/bench-scale.png.
#   bench/run.sh [BUILD_DIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
CPSIM="$B/cpsim"
[ -x "$CPSIM" ] || { echo "bench: build first ($CPSIM not found)" >&2; exit 1; }
OUT=bench/results
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one_run NAME ARGS... -> prints "wall_s peak_MB ops"
one_run() {
  local json="$tmp/r.json"
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$CPSIM" run "$@" --json "$json" -q
  read -r wall kb < "$tmp/time"
  local ops
  ops=$(python3 -c "import json;print(json.load(open('$json'))['simulation']['ops'])")
  echo "$wall $((kb / 1024)) $ops"
}
median3() {  # runs one_run three times, prints the median line by wall time
  { one_run "$@"; one_run "$@"; one_run "$@"; } | sort -n | sed -n 2p
}

echo "== targets (median of 3 where quick)"
printf "%-48s %10s %10s %12s %12s\n" target wall_s peak_MB ops ops_per_s | tee "$OUT/targets.txt"
target() {
  local name=$1; shift
  local line
  if [ "$name" = "405B" ] || [ "$name" = "405B analytic" ]; then line=$(one_run "$@"); else line=$(median3 "$@"); fi
  read -r wall mb ops <<<"$line"
  printf "%-48s %10s %10s %12s %12.0f\n" "$name: $*" "$wall" "$mb" "$ops" "$(python3 -c "print($ops/max($wall,1e-9))")" | tee -a "$OUT/targets.txt"
}
target "anchor step 128K, 8 GPUs" scenarios/anchor-128k-ring-zigzag.yaml
target "70B 128K, 1,024 GPUs" scenarios/llama3-70b-128k-1024-h100.yaml
target "405B" scenarios/llama3-405b-16k-gpus.yaml
target "405B analytic" scenarios/llama3-405b-16k-gpus.yaml --engine analytic
start=$(date +%s.%N)
"$CPSIM" sweep bench/sweep-1000.yaml -j 2 -o "$tmp/sweep" > /dev/null 2>&1
end=$(date +%s.%N)
printf "%-48s %10.1f\n" "1,000-scenario sweep, -j 2" "$(python3 -c "print($end-$start)")" | tee -a "$OUT/targets.txt"

echo "== whole process: wall / user / sys seconds and peak RSS"
# Each row runs once (the big ones take minutes); a row over ROW_LIMIT_S seconds is cut and
# printed as a timeout. ROW_LIMIT_S=0 skips the rows slower than a minute (405B full replay, plan).
ROW_LIMIT_S=${ROW_LIMIT_S:-900}
printf "%-64s %9s %9s %9s %9s\n" workload wall_s user_s sys_s peak_MB | tee "$OUT/process.txt"
row() {  # row NAME CMD... -> one line of the table
  local name=$1; shift
  local rc=0
  timeout "$ROW_LIMIT_S" /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" > /dev/null 2> "$tmp/err" || rc=$?
  if [ "$rc" = 124 ]; then
    printf "%-64s %9s\n" "$name" "timeout>${ROW_LIMIT_S}s" | tee -a "$OUT/process.txt"
  elif [ "$rc" != 0 ]; then
    printf "%-64s %9s (%s)\n" "$name" "failed" "$(tail -1 "$tmp/err")" | tee -a "$OUT/process.txt"
  else
    read -r wall user sys kb < "$tmp/time"
    printf "%-64s %9s %9s %9s %9s\n" "$name" "$wall" "$user" "$sys" "$((kb / 1024))" | tee -a "$OUT/process.txt"
  fi
}
noise=(--set simulation.symmetry=off --set perturb.jitter_cv=0.02 --set perturb.gpu_variation_cv=0.03)
row "anchor step, 8 GPUs, whole process" "$CPSIM" run scenarios/anchor-128k-ring-zigzag.yaml -q
row "Llama-3 70B, 1,024 H100, full replay (symmetry off)" \
    "$CPSIM" run scenarios/llama3-70b-128k-1024-h100.yaml --set simulation.symmetry=off -q
row "--trace of the 1,024-GPU scenario (streamed)" \
    "$CPSIM" run scenarios/llama3-70b-128k-1024-h100.yaml -q --trace "$tmp/t.json"
row "cpsim collective 1 GiB all-reduce, 1,024 GPUs (SimGrid)" \
    "$CPSIM" collective --platform h100-cluster --param nodes=128 --op allreduce --ranks 1024 -b 1G -e 1G
if [ "$ROW_LIMIT_S" != 0 ]; then
  row "cpsim collective 1 GiB all-reduce, 16,384 GPUs (SimGrid)" \
      "$CPSIM" collective --platform h100-cluster --param nodes=2048 --op allreduce --ranks 16384 -b 1G -e 1G
  # (268 M pairs as transfers: killed at 24 GB after 108 s before the pipelined all-to-all)
  row "cpsim collective 1 GiB all-to-all, 16,384 GPUs (SimGrid)" \
      "$CPSIM" collective --platform h100-cluster --param nodes=2048 --op alltoall --ranks 16384 -b 1G -e 1G
  # The straggler what-if (4 more full replays) is left out: the critical path names the
  # straggler, and each what-if replay costs as much as a sample.
  # -j 3: the two other seeds replay beside the main run (each child reads the parent's graph
  # copy-on-write; peak RSS is the largest process, the parent and 3 children together used
  # 9.5 GB together when measured on a 2-core, 16 GB machine).
  row "Llama 3 405B, 16,384 H100, full replay + jitter/variation, 3 samples, SimGrid" \
      "$CPSIM" run scenarios/llama3-405b-16k-gpus.yaml "${noise[@]}" --samples 3 -j 3 \
      --no-what-if-straggler -q
  row "405B-class step on 131,072 GPUs (symmetry allowed)" \
      "$CPSIM" run scenarios/llama3-405b-16k-gpus.yaml --set platform.nodes=16384 --set parallel.dp=64 -q
fi
if "$CPSIM" plan --help > /dev/null 2>&1; then  # `cpsim plan` where it exists
  row "cpsim plan, 405B on 16,384 GPUs, -j 2" \
      "$CPSIM" plan scenarios/llama3-405b-16k-gpus.yaml --gpus 16384 -j 2
fi

echo "== growth with GPUs (llama3-70b, 128K, TP 8, CP <= 16, rest DP; SimGrid)"
echo "gpus,wall_s,peak_MB,ops" > "$OUT/scale_gpus.csv"
for n in 8 64 128 1024 4096 16384; do
  cp=$(( n / 8 < 16 ? n / 8 : 16 )); dp=$(( n / 8 / cp )); nodes=$(( n / 8 ))
  read -r wall mb ops <<<"$(one_run scenarios/llama3-70b-128k-1024-h100.yaml --set platform.nodes=$nodes \
      --set parallel.cp=$cp --set parallel.dp=$dp)"
  echo "$n,$wall,$mb,$ops" | tee -a "$OUT/scale_gpus.csv"
done

echo "== growth with sequence length (anchor model, 8 GPUs, ring zig-zag, full step; SimGrid)"
echo "seq_len,wall_s,peak_MB,ops" > "$OUT/scale_seq.csv"
for s in 32K 64K 128K 256K 512K 1M; do
  read -r wall mb ops <<<"$(one_run scenarios/anchor-128k-ring-zigzag.yaml --set training.seq_len=$s)"
  echo "$s,$wall,$mb,$ops" | tee -a "$OUT/scale_seq.csv"
done

echo "== sweep of 200 points: local -j 2 against a one-node Slurm (needs root, slurm-wlm, munge)"
slurm_rc=0
tests/slurm/run_slurm_test.sh --bench "$CPSIM" || slurm_rc=$?
[ "$slurm_rc" -eq 0 ] || [ "$slurm_rc" -eq 77 ] || echo "bench: the Slurm timing failed (exit $slurm_rc)"

if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 tools/cpsim_plot.py bench "$OUT" -o docs/gallery/bench-scale
fi
