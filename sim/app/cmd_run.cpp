// `cpsim run` and `cpsim check`.
#include <iostream>
#include <memory>

#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "app/memory_advice.hpp"
#include "app/text_format.hpp"
#include "app/progress.hpp"
#include "app/simulate.hpp"
#include "app/work_limit.hpp"
#include "model/memory_verdict.hpp"
#include "support/safe_write.hpp"
#include "scenario/index_list.hpp"
#include "scenario/load.hpp"
#include "support/shell_quote.hpp"

namespace cpsim::app {

namespace {
struct RunArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json, trace, trace_ranks, trace_layers, engine;
  bool quiet = false;
  bool what_if = false, no_what_if = false;
  int candidates = 4;
  int perturbations = 4;
  int samples = 0;
  int jobs = 1;
  std::string max_memory;
  bool force = false;
};
}  // namespace

void register_run(CLI::App& app, int& rc) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "simulate a scenario and print a summary");
  cmd->add_option("scenario", args->scenario, "scenario YAML file")->required();
  cmd->add_option("--set", args->sets, "override a scenario key: key.path=value (repeatable)");
  cmd->add_option("--json", args->json, "write the full result as JSON");
  cmd->add_option("--trace", args->trace, "write a Chrome/Perfetto trace (JSON)");
  cmd->add_option("--trace-ranks", args->trace_ranks, "keep only these ranks in the trace, e.g. 0-7");
  cmd->add_option("--trace-layers", args->trace_layers, "keep only these layers in the trace, e.g. 0-3");
  cmd->add_option("--engine", args->engine, "shortcut for --set simulation.engine=simgrid|analytic");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing on success");
  auto* wi = cmd->add_flag("--what-if-straggler", args->what_if,
                           "re-simulate without the most slowed ranks' perturbation and name the straggler "
                           "that lengthens the step most (default: on when the scenario has perturbations)");
  cmd->add_flag("--no-what-if-straggler", args->no_what_if, "skip the straggler what-if")->excludes(wi);
  cmd->add_option("--what-if-candidates", args->candidates,
                  "ranks the what-if re-simulates, most slowed first (default 4)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--what-if-perturbations", args->perturbations,
                  "with perturbations, re-simulate without each of the N most severe (one of each kind in "
                  "turn) and without all; 0 skips it (default 4)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--samples", args->samples,
                  "also run K seeds (seed, seed+1, ...) each in its own process and report the "
                  "step-time distribution")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-j,--jobs", args->jobs, "child processes at once for the what-if and samples (default 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--max-memory", args->max_memory,
                  "refuse a run whose estimated memory is above this (e.g. 16GiB; default: half of this "
                  "machine's memory)");
  cmd->add_flag("--force", args->force, "run even when the estimate is over --max-memory");
  cmd->callback([args, &rc] {
    // Outputs first: a bad path must fail before minutes of simulation, and never destroy the
    // scenario.
    support::check_outputs({{"--json", args->json}, {"--trace", args->trace}}, {{"", args->scenario}});
    WorkLimits limits;
    if (!args->max_memory.empty()) limits.max_memory_bytes = parse_memory_limit(args->max_memory);
    limits.force = args->force;
    limits.trace = !args->trace.empty();
    scenario::Scenario sc;
    auto sets = args->sets;
    if (!args->engine.empty()) sets.push_back("simulation.engine=" + args->engine);
    try {
      sc = scenario::load_scenario(args->scenario, sets);
    } catch (const scenario::InputError& e) {
      std::cerr << e.what() << "\n";
      rc = 2;
      return;
    }
    SimulateOptions opt;
    opt.json_path = args->json;
    opt.trace_path = args->trace;
    if (args->what_if || args->no_what_if) opt.what_if_straggler = args->what_if;
    opt.what_if_candidates = args->candidates;
    opt.what_if_perturbations = args->perturbations;
    opt.samples = args->samples;
    opt.jobs = args->jobs;
    opt.progress = progress_wanted(args->quiet);
    try {
      if (!args->trace_ranks.empty()) opt.trace_filter.ranks = scenario::parse_index_list(args->trace_ranks);
      if (!args->trace_layers.empty()) opt.trace_filter.layers = scenario::parse_index_list(args->trace_layers);
    } catch (const std::invalid_argument& e) {
      std::cerr << "error: --trace-ranks/--trace-layers: " << e.what() << "\n";
      rc = 2;
      return;
    }
    rc = report_errors(args->scenario, "simulation failed: ", [&] {
      check_work(sc, limits);
      const SimulateOutput out = simulate(sc, opt);
      if (!args->quiet) std::cout << out.summary;
      // An OOM verdict comes with the cheapest change that fits, re-evaluated by the memory
      // model (the full list, with step times: `cpsim memory`).
      // One attention layer's memory is not the step's: the step's changes do not apply to it.
      if (!args->quiet && !out.result["memory"]["fits"].get<bool>() && out.result["scope"] != "attention-layer") {
        const auto changes = memory_changes(args->scenario, sets, sc);
        std::cout << "  does not fit; `cpsim memory " << support::shell_quote(args->scenario) << "` lists what does";
        if (!changes.empty() && changes.front().memory.fits)
          std::cout << ", e.g. " << changes.front().what << " ("
                    << fmt("%.1f GB", changes.front().memory.peak_bytes / 1e9)
                    << (model::memory_fit(changes.front().memory.peak_bytes, changes.front().memory.capacity_bytes) ==
                                model::MemoryFit::Tight
                            ? ", tight"
                            : "")
                    << "):\n"
                    << "    " << run_line(args->scenario, changes.front().sets);
        std::cout << "\n";
      }
      return 0;
    });
  });
}

void register_check(CLI::App& app, int& rc) {
  auto path = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("check", "validate a scenario file only");
  cmd->add_option("scenario", *path, "scenario YAML file")->required();
  cmd->add_option("--set", *sets, "override a scenario key: key.path=value (repeatable)");
  cmd->callback([path, sets, &rc] {
    rc = report_errors(*path, "", [&] {
      const auto sc = scenario::load_scenario(*path, *sets);
      // What `run` refuses for input reasons before it simulates, `check` refuses too: the
      // platform as perturbed (every rail down), the cost profile (a NaN cell), the schedule
      // (combinations the builders reject) and the work estimate.
      validate_for_run(sc);
      std::cout << *path << ": ok (" << sc.model.name << " on " << sc.platform.name << ", "
                << sc.platform.total_gpus() << " GPUs)\n";
      return 0;
    });
  });
}

}  // namespace cpsim::app
