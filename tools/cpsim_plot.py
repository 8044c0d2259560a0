#!/usr/bin/python3
"""Plots from cpsim's outputs (JSON and CSV only). Every command writes OUT.png and OUT.svg.

  memory     memory per GPU by term, a stacked bar per configuration  (cpsim memory --json, or a YAML)
  pareto     throughput against memory of the layouts `cpsim plan` simulated      (cpsim plan --json)
  timeline   a Gantt chart per GPU of one layer's forward and backward  (cpsim run --trace)
  measured   a profiled step and its simulation on one time axis     (cpsim compare --timeline)
  compare    step time as compute / exposed communication / idle, a bar per run
                                                     (cpsim run --json files, or a sweep directory)
  sweep      a metric against a swept axis, one line per schedule or topology  (cpsim sweep -o DIR)
  heatmap    a metric over two swept axes                                     (cpsim sweep -o DIR)
  partition  causal (i, j) pairs per GPU for each layout                 (cpsim partition --json)
  bench      cpsim's wall time and memory against GPUs and sequence length    (bench/run.sh CSVs)

Run `tools/cpsim_plot.py COMMAND -h` for a command's options. Needs Debian's python3-matplotlib:
call it as /usr/bin/python3 tools/cpsim_plot.py, or directly (the first line names that Python).

Examples:
  cpsim run scenarios/anchor-128k-ring-zigzag.yaml --set simulation.scope=attention-layer \\
      --trace /tmp/t.json && tools/cpsim_plot.py timeline /tmp/t.json -o /tmp/timeline
  cpsim sweep sweeps/schedules-x-seqlen.yaml -o /tmp/s && \\
      tools/cpsim_plot.py sweep /tmp/s --x training.seq_len --series schedule -o /tmp/sweep
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COMMANDS = ("memory", "pareto", "timeline", "measured", "compare", "sweep", "heatmap", "partition", "bench")


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"error: unknown command '{cmd}' (one of: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    if cmd == "memory":
        import plot_memory
        return plot_memory.main(rest)
    if cmd == "pareto":
        import plot_plan
        return plot_plan.main(rest)
    if cmd == "timeline":
        import plot_timeline
        return plot_timeline.main(rest)
    if cmd == "measured":
        import plot_measured
        return plot_measured.main(rest)
    if cmd == "compare":
        import plot_compare
        return plot_compare.main(rest)
    if cmd in ("sweep", "heatmap"):
        import plot_sweep
        return plot_sweep.main(cmd, rest)
    if cmd == "bench":
        import plot_bench
        return plot_bench.main(rest)
    import plot_partition
    return plot_partition.main(rest)


if __name__ == "__main__":
    sys.exit(main())
