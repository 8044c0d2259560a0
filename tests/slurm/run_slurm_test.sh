#!/usr/bin/env bash
# `cpsim sweep --slurm` against a real Slurm: starts a one-node cluster on localhost (munged,
# slurmctld and slurmd from Debian's slurm-wlm and munge, all state in a temporary folder, on
# free ports), then
#   1. submits tests/slurm/small.yaml as an array job, waits, merges, and checks that the merged
#      CSV is the local run's (same rows, same values; sim_wall_s, a host time, aside);
#   2. merges again and checks the file did not change (a merge is idempotent);
#   3. submits it again, kills one array task midway, shows what --merge reports, resumes with
#      --slurm --resume (which resubmits only that shard) and checks nothing was lost or
#      duplicated and no finished point ran twice;
#   4. with --bench: times tests/slurm/timing-200.yaml (200 points) locally with -j 2 and
#      through the cluster.
# It stops exactly the daemons it started (by pid) and removes its folder, even on failure.
#
#   tests/slurm/run_slurm_test.sh [--bench] [path/to/cpsim]      # default: build/cpsim
# Exit codes: 0 passed, 1 failed, 77 skipped (Slurm or munge not installed, or not root).
# CPSIM_SLURM_KEEP=1 keeps the folder (configuration, daemon logs, sweep outputs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=0
if [ "${1:-}" = --bench ]; then bench=1; shift; fi
cpsim=${1:-$here/../../build/cpsim}
export PATH=$PATH:/usr/sbin:/sbin

skip() { echo "SKIP: $*"; exit 77; }
for tool in munged slurmctld slurmd sbatch squeue sinfo scancel python3; do
  command -v "$tool" >/dev/null || skip "$tool not found (scripts/install-deps.sh installs slurm-wlm and munge)"
done
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root"
[ -x "$cpsim" ] || { echo "FAIL: no cpsim binary at $cpsim" >&2; exit 1; }
cpsim=$(readlink -f "$cpsim")

t_start=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(date +%s.%N)"; }
step() { echo; echo "== [$(elapsed "$t_start") s] $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

T=$(mktemp -d /tmp/cpsim-slurm.XXXXXX)
chmod 755 "$T"
mkdir -p "$T/munge" "$T/state" "$T/spool" "$T/log"
pids=()
cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && [ ${#pids[@]} -gt 1 ]; then
    # Jobs of this cluster only (SLURM_CONF names it): cancel what is left before the daemons go.
    jobs=$(squeue --noheader --format=%A 2>/dev/null | sort -u)
    [ -n "$jobs" ] && scancel $jobs 2>/dev/null && sleep 2
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    for f in "$T"/log/*.log; do echo "--- $f (last lines)"; tail -n 15 "$f"; done
  fi
  if [ "${CPSIM_SLURM_KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "one-node Slurm on localhost in $T"
read -r ctld_port slurmd_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$T/munge/munge.key"
munged --force --foreground --socket="$T/munge/munge.socket" --key-file="$T/munge/munge.key" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" --log-file="$T/log/munged.log" \
  >"$T/log/munged.out" 2>&1 &
pids+=($!)
mem_mb=$(free -m | awk '/^Mem:/ {m = $2 - 1024; print (m > 512 ? m : 512)}')
cat >"$T/slurm.conf" <<EOF
ClusterName=cpsimtest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
KillWait=5
NodeName=localhost CPUs=$(nproc) RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$T/slurm.conf
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.socket" ] || fail "munged did not start (see $T/log/munged.out)"
slurmctld -D -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >"$T/log/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 150); do
  state=$(sinfo --noheader --format=%t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "the node is not idle after 30 s (sinfo: '$state')"
sinfo
echo "munged, slurmctld, slurmd: pids ${pids[*]}; ports $ctld_port, $slurmd_port"

# CSV comparison: same columns, same rows by id, same values; sim_wall_s (a host time) aside.
same_csv() {
  python3 - "$1" "$2" <<'EOF'
import csv, sys
def load(p):
    with open(p, newline="") as f:
        rows = list(csv.DictReader(f))
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"{p}: duplicate ids"
    return {r["id"]: {k: v for k, v in r.items() if k != "sim_wall_s"} for r in rows}
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    for i in sorted(set(a) | set(b)):
        if a.get(i) != b.get(i):
            print(f"  {i}: {a.get(i)}\n  {i}: {b.get(i)}")
    sys.exit(f"{sys.argv[1]} and {sys.argv[2]} differ")
print(f"  same {len(a)} rows, same values: {sys.argv[1]} == {sys.argv[2]}")
EOF
}
rows() { python3 -c 'import csv,sys; print(sum(1 for _ in csv.DictReader(open(sys.argv[1]))))' "$1"; }
wait_gone() {  # job id: until squeue no longer lists any of its tasks
  for _ in $(seq 600); do
    [ -z "$(squeue --noheader --array --jobs="$1" --format=%i 2>/dev/null)" ] && return 0
    sleep 0.2
  done
  fail "job $1 still queued after 120 s"
}

small=$here/small.yaml
n_small=$("$cpsim" sweep "$small" --list | wc -l)

step "local run of $(basename "$small") ($n_small points, -j 2)"
"$cpsim" sweep "$small" -j 2 -o "$T/local" -q
echo "  $(rows "$T/local/results.csv") rows -> $T/local/results.csv"

step "the same sweep through Slurm: --slurm --array-size 4 --wait"
"$cpsim" sweep "$small" --slurm --array-size 4 --time 5 --wait -o "$T/array"
echo "  the batch script, $T/array/sweep.sbatch:"
sed 's/^/    /' "$T/array/sweep.sbatch"
grep -qx "#SBATCH --array=0-3" "$T/array/sweep.sbatch" || fail "no --array=0-3 in the script"
grep -qx "#SBATCH --output=$T/array/slurm-%A_%a.out" "$T/array/sweep.sbatch" || fail "wrong --output"
grep -q "^exec $cpsim sweep $small --shard \"\${SLURM_ARRAY_TASK_ID}/4\" -o $T/array " "$T/array/sweep.sbatch" ||
  fail "the script does not run the absolute cpsim on the absolute sweep and directory"
ls "$T"/array/slurm-*_[0-3].out >/dev/null || fail "no task logs"
same_csv "$T/local/results.csv" "$T/array/results.csv"

step "merging again changes nothing"
cp "$T/array/results.csv" "$T/merged-once.csv"
"$cpsim" sweep --merge "$T/array"
cmp "$T/array/results.csv" "$T/merged-once.csv" && echo "  results.csv is byte-identical"

step "kill one array task midway, then --resume"
# Each point simulates a whole step of 32 micro-batches with SimGrid here (about a second), so
# shard 1 is caught after its first point and before its last; compared with a local run of the
# same points.
slow=(--set simulation.scope=step --set simulation.engine=simgrid --set training.micro_batches=32)
"$cpsim" sweep "$small" "${slow[@]}" -j 2 -o "$T/local-step" -q
job=$("$cpsim" sweep "$small" "${slow[@]}" --slurm --array-size 3 -q -o "$T/killed")
echo "  submitted job $job (3 tasks)"
shard1_points=$("$cpsim" sweep "$small" --list --shard 1/3 | wc -l)
csv1=$T/killed/results.1-of-3.csv
for _ in $(seq 600); do
  [ -f "$csv1" ] && [ "$(rows "$csv1")" -ge 1 ] && break
  sleep 0.1
done
done_before=$(rows "$csv1")
[ "$done_before" -ge 1 ] && [ "$done_before" -lt "$shard1_points" ] ||
  fail "shard 1 had $done_before of $shard1_points points when it was to be killed"
scancel "${job}_1"
echo "  scancel ${job}_1 after $done_before of its $shard1_points points"
wait_gone "$job"
echo "  task log of the killed task:"
sed 's/^/    /' "$T/killed/slurm-${job}_1.out"
# Finished = recorded in a shard's results CSV. A point killed after writing its runs/<id>.json
# but before its row is not finished (the row is the sweep's record), and --resume runs it again:
# only recorded points must keep their result file untouched.
declare -A stamp
recorded=$(python3 -c 'import csv, glob, sys
print(" ".join(r["id"] for f in sorted(glob.glob(sys.argv[1] + "/results.*-of-*.csv")) for r in csv.DictReader(open(f))))' "$T/killed")
for id in $recorded; do
  j="$T/killed/runs/$id.json"
  [ -f "$j" ] && stamp[$j]=$(stat -c %Y.%y "$j")
done
[ "${#stamp[@]}" -ge 1 ] || fail "no recorded point has a result file to check"
set +e
"$cpsim" sweep --merge "$T/killed" 2>&1 | tee "$T/merge-killed.txt"
merge_rc=${PIPESTATUS[0]}
set -e
[ "$merge_rc" -eq 1 ] || fail "--merge of an incomplete sweep exited $merge_rc, not 1"
grep -q "shard 1/3: .* missing" "$T/merge-killed.txt" || fail "--merge did not report shard 1 as missing points"
kept=$(rows "$T/killed/results.csv")
echo "  --resume:"
"$cpsim" sweep "$small" "${slow[@]}" --slurm --resume --wait -o "$T/killed" 2>&1 | tee "$T/resume.txt"
grep -q "resubmitting shard 1 of 3" "$T/resume.txt" || fail "--resume did not resubmit shard 1 alone"
python3 - "$T/killed/sweep-slurm.json" <<'EOF'
import json, sys
subs = json.load(open(sys.argv[1]))["submissions"]
assert [s["shards"] for s in subs] == [[0, 1, 2], [1]], subs
print(f"  submissions: {[(s['job_id'], s['shards']) for s in subs]}")
EOF
same_csv "$T/local-step/results.csv" "$T/killed/results.csv"
for j in "${!stamp[@]}"; do
  [ "$(stat -c %Y.%y "$j")" = "${stamp[$j]}" ] || fail "$j was written again: a finished point ran twice"
done
echo "  $kept rows before the resume, $(rows "$T/killed/results.csv") after; the ${#stamp[@]} results" \
  "written before it were not rewritten"

if [ $bench = 1 ]; then
  big=$here/timing-200.yaml
  step "timing: $(basename "$big") ($("$cpsim" sweep "$big" --list | wc -l) points)"
  t0=$(date +%s.%N)
  "$cpsim" sweep "$big" -j 2 -o "$T/t-local" -q
  t_local=$(elapsed "$t0")
  t0=$(date +%s.%N)
  "$cpsim" sweep "$big" --slurm --array-size "$(nproc)" --wait -q -o "$T/t-slurm-n"
  t_slurm_n=$(elapsed "$t0")
  t0=$(date +%s.%N)
  "$cpsim" sweep "$big" --slurm --array-size 8 --wait -q -o "$T/t-slurm-8"
  t_slurm_8=$(elapsed "$t0")
  same_csv "$T/t-local/results.csv" "$T/t-slurm-n/results.csv"
  same_csv "$T/t-local/results.csv" "$T/t-slurm-8/results.csv"
  echo "  wall time of the 200 points on $(nproc) CPUs (a benchmark: printed, never checked):"
  printf '    %-48s %6s s\n' "local, -j 2" "$t_local" \
    "one-node Slurm, --array-size $(nproc) (1 CPU per task)" "$t_slurm_n" \
    "one-node Slurm, --array-size 8 (1 CPU per task)" "$t_slurm_8"
fi

step "PASS"
