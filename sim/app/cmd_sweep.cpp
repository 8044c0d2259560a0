// `cpsim sweep`: runs every point of a sweep file in its own `cpsim run` process (SimGrid
// allows one engine per process), N at a time, and records each as it finishes: one CSV row
// and one result JSON per point, both written atomically, so an interrupted sweep loses
// nothing and `--resume` picks up where it stopped. `--shard i/K` runs one of K shards balanced
// by expected cost; `--slurm` submits the K shards as one Slurm array job and `--merge` joins
// the shards' CSVs into one.
// The code is in sim/app/sweep/; this file holds only the argument handling.
#include <cmath>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "app/cli_checks.hpp"
#include "app/commands.hpp"
#include "app/process_pool.hpp"
#include "app/slurm.hpp"
#include "app/sweep/common.hpp"
#include "app/sweep/manifest.hpp"
#include "app/sweep/pivot.hpp"
#include "app/sweep/results_csv.hpp"
#include "app/sweep/runner.hpp"
#include "app/sweep/shards.hpp"
#include "app/sweep/slurm_job.hpp"
#include "support/safe_write.hpp"
#include "support/shell_quote.hpp"

namespace cpsim::app {

namespace {

using namespace sweep;

int run_merge(const SweepArgs& a) {
  const fs::path dir = absolute_dir(a.merge_dir);
  if (!fs::is_directory(dir)) return usage_error("--merge: no directory " + dir.string());
  std::optional<Manifest> m;
  try {
    m = read_manifest(dir);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
  const std::string file = !a.sweep_file.empty() ? a.sweep_file : m ? m->sweep_file : "";
  if (file.empty())
    return usage_error("--merge: " + dir.string() + " has no " + kManifest +
                       " (it was not submitted with --slurm); name the sweep file: cpsim sweep SWEEP.yaml --merge DIR");
  const std::vector<std::string> sets = !a.sets.empty() ? a.sets : m ? m->sets : std::vector<std::string>{};
  size_t k = 0;
  if (m) {
    if (a.array_size && a.array_size != m->shards)
      return usage_error("--merge: " + dir.string() + " was submitted as " + std::to_string(m->shards) +
                         " shards, not " + std::to_string(a.array_size));
    k = m->shards;
  } else if (a.array_size) {
    k = a.array_size;
  } else {
    // Without a manifest, K is in the shard files' names: results.i-of-K.csv.
    std::set<size_t> ks;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      size_t i = 0, kk = 0;
      char tail[8] = {};
      if (std::sscanf(name.c_str(), "results.%zu-of-%zu.cs%1s", &i, &kk, tail) == 3 && name.ends_with(".csv") &&
          shard_csv_name(i, kk) == name && i < kk && kk <= kMaxShards)
        ks.insert(kk);
    }
    if (ks.empty()) {
      std::cerr << "merge: no shard files (results.i-of-K.csv) in " << dir.string() << "\n";
      return 1;
    }
    if (ks.size() > 1) {
      std::string list;
      for (size_t kk : ks) list += (list.empty() ? "" : ", ") + std::to_string(kk);
      return usage_error("--merge: " + dir.string() + " holds shards of several sizes K (" + list +
                         "); choose one with --array-size K");
    }
    k = *ks.begin();
  }
  const auto sweep = load_points(file, sets);
  if (!sweep) return 2;
  const auto shard_of = assign_shards(point_costs(sweep->points), k);
  const Collected c = collect_shards(dir, sweep->points, shard_of, k);
  std::string hint;
  if (m) hint = "cpsim sweep " + slurm::shell_quote(file) + " --slurm --resume -o " + slurm::shell_quote(dir.string());
  else hint = "cpsim sweep " + slurm::shell_quote(file) + " --shard i/" + std::to_string(k) + " --resume -o " +
              slurm::shell_quote(dir.string()) + " for each shard i above";
  try {
    const std::string csv = write_merged(dir, sweep->points, c);
    return report_merge(c, dir, csv, m, hint, a.quiet);
  } catch (const std::exception& e) {
    std::cerr << "merge: " << e.what() << "\n";
    return 1;
  }
}

int run_sweep(const SweepArgs& a, pool::Runner& runner, pool::Clock& clock) {
  if (!a.merge_dir.empty() && (a.slurm || !a.shard.empty() || a.list || a.wait || a.resume))
    return usage_error("--merge DIR merges what is in DIR; it takes no --slurm, --shard, --list, --wait or --resume");
  if (a.slurm && !a.shard.empty())
    return usage_error("--slurm submits every shard; --shard is what each array task runs");
  if (a.slurm && a.list) return usage_error("--list runs nothing; use --list --shard i/K to see one shard's points");
  if (!a.slurm) {
    if (a.wait) return usage_error("--wait needs --slurm");
    if (!a.partition.empty() || !a.time_limit.empty() || !a.sbatch_args.empty())
      return usage_error("--partition, --time and --sbatch-arg need --slurm");
    if (a.array_size && a.merge_dir.empty()) return usage_error("--array-size needs --slurm or --merge");
  }
  if (a.timeout_s < 0 || !std::isfinite(a.timeout_s))
    return usage_error("--timeout: expected seconds >= 0 (0 = no limit)");
  if (!a.merge_dir.empty()) return run_merge(a);
  if (a.sweep_file.empty()) return usage_error("a sweep file is required: cpsim sweep SWEEP.yaml ...");

  std::optional<std::pair<size_t, size_t>> shard;
  if (!a.shard.empty()) {
    shard = parse_shard(a.shard);
    if (!shard) return usage_error("--shard: expected i/K with 0 <= i < K, got '" + a.shard + "'");
  }
  const auto loaded = load_points(a.sweep_file, a.sets);
  if (!loaded) return 2;
  const scenario::Sweep& sweep = *loaded;
  if (a.slurm) return run_slurm(a, sweep, runner, clock);

  std::vector<size_t> todo;
  if (shard) {
    const auto shard_of = assign_shards(point_costs(sweep.points), shard->second);
    for (size_t i = 0; i < sweep.points.size(); ++i)
      if (shard_of[i] == shard->first) todo.push_back(i);
  } else {
    for (size_t i = 0; i < sweep.points.size(); ++i) todo.push_back(i);
  }

  if (a.list) {
    for (size_t i : todo) {
      // A line a shell runs as is: the point's id as a trailing comment.
      const auto& p = sweep.points[i];
      std::cout << "cpsim run " << support::shell_quote(p.base_path);
      for (const auto& o : p.overrides) std::cout << " --set " << support::shell_quote(o);
      std::cout << "  # " << p.id << "\n";
    }
    return 0;
  }

  if (!a.pivot.empty()) {
    try {
      validate_pivot(a.pivot, csv_header(swept_keys(sweep.points)));
    } catch (const std::invalid_argument& e) {
      return usage_error(e.what());
    }
  }
  SweepArgs args = a;
  // The name comes from the sweep file: as one path component, "../../x" stays here.
  if (args.out_dir.empty()) args.out_dir = support::path_component(sweep.name) + "-sweep";
  if (args.jobs <= 0) args.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::error_code ec;
  fs::create_directories(fs::path(args.out_dir) / "runs", ec);
  if (!ec) fs::create_directories(fs::path(args.out_dir) / "logs", ec);
  if (ec) {
    std::cerr << "error: cannot create " << args.out_dir << ": " << ec.message() << "\n";
    return 1;
  }
  const std::string csv_name = shard ? shard_csv_name(shard->first, shard->second) : "results.csv";
  try {
    const OutputLock lock(args.out_dir, csv_name);
    SweepRunner sweep_runner(args, sweep.points, csv_name, runner, clock);
    if (args.resume) sweep_runner.load_previous(todo);
    const int code = sweep_runner.run(todo);
    if (!args.pivot.empty() && !pool::interrupted())
      std::cout << pivot_table((fs::path(args.out_dir) / csv_name).string(), args.pivot);
    return code;
  } catch (const std::exception& e) {
    std::cerr << "sweep: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void register_sweep(CLI::App& app, int& rc, pool::Runner* runner, pool::Clock* clock) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", "run every scenario of a sweep file, N at a time, here or on Slurm");
  cmd->add_option("sweep", a->sweep_file, "sweep YAML file (with --merge: taken from DIR when submitted with --slurm)");
  cmd->add_option("-o,--out", a->out_dir, "output directory (default: <sweep name>-sweep)");
  cmd->add_option("-j,--jobs", a->jobs,
                  "scenarios run at once (default: CPU count; with --slurm: CPUs per array task, default 1)")
      ->check(whole_number(1, 1024));
  cmd->add_option("--timeout", a->timeout_s, "seconds one scenario may run before it is killed (0 = no limit)")
      ->default_str("600");
  cmd->add_option("--set", a->sets,
                  "override a scenario key in every point, after the sweep's own values (repeatable)");
  cmd->add_flag("--resume", a->resume,
                "keep the points a previous run finished; run the rest (with --slurm: resubmit only the shards "
                "with missing or failed points)");
  cmd->add_flag("--list", a->list, "print each point as a runnable `cpsim run ... --set` line and exit");
  cmd->add_option("--pivot", a->pivot, "after the sweep, print step time as a table: KEY1 rows x KEY2 columns")
      ->type_name("KEY1,KEY2");
  cmd->add_flag("-q,--quiet", a->quiet, "print nothing but errors (with --slurm: the job id)");
  // Documented in docs/workflow.md; hidden here: what each array task (or batch job) runs.
  cmd->add_option("--shard", a->shard, "run only shard i of K (cost-balanced) (i/K)")->group("");
  auto* slurm = cmd->add_flag("--slurm", a->slurm,
                              "submit the sweep as one Slurm array job of K shards (-o DIR on a shared filesystem)");
  cmd->add_option("--array-size", a->array_size, "K: array tasks (shards) for --slurm (default: min(points, 32))")
      ->check(CLI::Range(size_t{1}, kMaxShards));
  cmd->add_option("--partition", a->partition, "Slurm partition (default: the cluster's)")->needs(slurm);
  cmd->add_option("--time", a->time_limit, "time limit of each array task, Slurm syntax (e.g. 30, 2:00:00)")
      ->needs(slurm);
  cmd->add_option("--sbatch-arg", a->sbatch_args,
                  "an extra sbatch option, e.g. --sbatch-arg=--account=proj (repeatable)")
      ->allow_extra_args(false)
      ->needs(slurm);
  cmd->add_flag("--wait", a->wait, "with --slurm: wait for the job, then merge")->needs(slurm);
  cmd->add_option("--merge", a->merge_dir,
                  "merge the shards in DIR into DIR/results.csv and report missing or failed ones")
      ->type_name("DIR");
  cmd->callback([a, &rc, runner, clock] {
    if (runner && clock) {
      rc = run_sweep(*a, *runner, *clock);
      return;
    }
    pool::SystemRunner system_runner;
    pool::SystemClock system_clock;
    rc = run_sweep(*a, system_runner, system_clock);
  });
}

}  // namespace cpsim::app
