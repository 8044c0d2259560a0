#!/usr/bin/env bash
# Rebuilds docs/gallery/ (every figure as PNG and SVG, plus the sweeps' CSVs) from the bundled
# scenarios and sweeps. Needs a built cpsim and Debian's python3-matplotlib.
#
#   tools/make_gallery.sh                      # uses build/cpsim
#   CPSIM=build-test/cpsim JOBS=4 tools/make_gallery.sh
#
# Environment: CPSIM (binary, default build/cpsim), JOBS (sweep parallelism, default nproc),
# GALLERY_OUT (default docs/gallery), GALLERY_WORK (scratch for runs and sweeps, default a
# temporary directory that is removed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."

CPSIM=${CPSIM:-build/cpsim}
JOBS=${JOBS:-$(nproc)}
OUT=${GALLERY_OUT:-docs/gallery}
PY=/usr/bin/python3
PLOT="$PY tools/cpsim_plot.py"

[[ -x $CPSIM ]] || { echo "error: no cpsim binary at $CPSIM (build it, or set CPSIM=...)" >&2; exit 2; }
$PY -c 'import matplotlib' 2>/dev/null ||
  { echo "error: $PY has no matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }

if [[ -n ${GALLERY_WORK:-} ]]; then
  WORK=$GALLERY_WORK
  mkdir -p "$WORK"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$OUT/data"
rm -f "$OUT"/*.png "$OUT"/*.svg "$OUT"/data/*.csv

step() { echo; echo "== $*"; }
timed() {  # label, command...: runs it and prints its wall time (a sweep's exit 1 = some point failed)
  local label=$1; shift
  local t0 rc=0
  t0=$(date +%s.%N)
  "$@" || rc=$?
  [[ $rc -le 1 ]] || { echo "error: $label failed (exit $rc)" >&2; exit "$rc"; }
  awk -v l="$label" -v a="$t0" -v b="$(date +%s.%N)" -v rc="$rc" \
    'BEGIN { printf "   %s: %.1f s wall (exit %d)\n", l, b - a, rc }'
}

step "memory: where each GPU's memory goes at 128K tokens (the lesson's first question)"
# No sharding, the sequence on 1 to 8 GPUs: model states 444.5 GB stay, full-recompute
# activations fall from 85.9 GB (one GPU) to 10.7 GB (eight).
$PLOT memory scenarios/anchor-128k-ring-zigzag.yaml --cpsim "$CPSIM" --set parallel.zero_stage=0 \
  --vary parallel.cp=1,2,4,8 -o "$OUT/memory-128k-cp" \
  --title "Anchor model at 128K tokens, no ZeRO: memory per GPU as CP splits the sequence"
$PLOT memory scenarios/anchor-128k-ring-zigzag.yaml --cpsim "$CPSIM" \
  --config "as bundled (ZeRO 3):" \
  --config "CP 16, 2 nodes:parallel.cp=16;platform.nodes=2" \
  --config "ZeRO 0:parallel.zero_stage=0" \
  --config "no recompute:training.recompute=none" -o "$OUT/memory-128k-changes" \
  --title "Anchor model at 128K tokens, CP 8 on one DGX H100: memory per GPU, and what changes it"

step "partition: the lesson's pair counts"
for sn in "16 4" "32 8"; do
  read -r s n <<<"$sn"
  files=()
  for l in contiguous zigzag striped; do
    "$CPSIM" partition --seq "$s" --cp "$n" --layout "$l" --json "$WORK/part-$s-$n-$l.json" >/dev/null
    files+=("$WORK/part-$s-$n-$l.json")
  done
  $PLOT partition "${files[@]}" -o "$OUT/partition-s$s-n$n"
done

step "timelines: one attention layer at 32K tokens, 8 GPUs of one DGX H100"
cut=(--set simulation.scope=attention-layer --set training.seq_len=32K -q)
for s in ring-contiguous ring-zigzag ulysses; do
  "$CPSIM" run "scenarios/anchor-128k-$s.yaml" "${cut[@]}" --trace "$WORK/trace-$s.json"
  $PLOT timeline "$WORK/trace-$s.json" -o "$OUT/timeline-$s" \
    --title "Anchor model, 32K tokens, CP 8 on one DGX H100: one attention layer, $s"
done

step "compare: the lesson's question, one training step at 128K tokens per schedule"
runs=()
for s in ring-contiguous ring-zigzag ring-striped allgather ulysses usp; do
  "$CPSIM" run "scenarios/anchor-128k-$s.yaml" -q --json "$WORK/step-$s.json"
  runs+=("$WORK/step-$s.json")
done
$PLOT compare "${runs[@]}" -o "$OUT/compare-schedules-128k" \
  --title "One training step of the anchor model at 128K tokens on one DGX H100 (CP 8)"

step "sweeps (-j $JOBS)"
for sw in schedules-x-seqlen fabrics usp-degrees; do
  rm -rf "${WORK:?}/$sw"
  timed "$sw" "$CPSIM" sweep "sweeps/$sw.yaml" -j "$JOBS" -o "$WORK/$sw" -q
  cp "$WORK/$sw/results.csv" "$OUT/data/$sw.csv"
done

step "sweep plots"
$PLOT sweep "$WORK/schedules-x-seqlen" --x training.seq_len --series schedule \
  --y step_time_s --y exposed_comm_s --logy -o "$OUT/sweep-schedules-x-seqlen" \
  --title "Schedules as the sequence grows: anchor model, CP 8 on one DGX H100, one attention layer"
$PLOT sweep "$WORK/fabrics" --x training.seq_len --series topology --facet schedule --logy \
  -o "$OUT/sweep-fabrics" \
  --title "The same CP-8 attention layer on NVSwitch, PCIe and InfiniBand"
$PLOT compare "$WORK/fabrics" --where training.seq_len=32K --where schedule=ring-zigzag \
  -o "$OUT/compare-fabrics-32k" \
  --title "Zig-zag ring attention, 32K tokens, CP 8: where the time goes on each fabric"
$PLOT heatmap "$WORK/usp-degrees" --x parallel.attention.ulysses_degree --y parallel.cp \
  --note ring_degree --best row -o "$OUT/heatmap-usp-degrees" \
  --title "USP at 128K tokens: attention layer time [ms] (best split per CP degree in red)"

step "stragglers: one slow GPU in the zig-zag ring"
"$CPSIM" run scenarios/anchor-128k-ring-zigzag.yaml -q --json "$WORK/strag-base.json" --engine analytic
"$CPSIM" run scenarios/perturb-slow-gpu.yaml -q --json "$WORK/strag-slow.json" --no-what-if-straggler --engine analytic
$PLOT compare "$WORK/strag-base.json" "$WORK/strag-slow.json" --labels "all GPUs nominal,one GPU slowed" \
  -o "$OUT/compare-straggler" --title "One slow GPU sets the pace of the whole CP-8 ring (128K tokens)"

step "bench: cpsim's own wall time and memory (from bench/run.sh's committed CSVs; rerun it to refresh)"
$PLOT bench bench/results -o "$OUT/bench-scale"

step "check"
missing=0
for img in $(grep -o '([a-z0-9-]*\.png)' "$OUT/README.md" 2>/dev/null | tr -d '()'); do
  [[ -f $OUT/$img ]] || { echo "   README.md shows $img, which was not made" >&2; missing=1; }
done
for f in "$OUT"/*.png; do echo "   $f"; done
exit $missing
