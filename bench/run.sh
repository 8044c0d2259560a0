#!/usr/bin/env bash
# Scale and speed benchmarks (issue 8). Not a test: prints wall time, peak memory and simulated
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

if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 tools/cpsim_plot.py bench "$OUT" -o docs/gallery/bench-scale
fi
