// `cpsim plan`: the fastest layout that fits on N GPUs. The search is plan_search.cpp; this file
// parses options, prints the ranked table and why the others lost, and writes the JSON.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/text_format.hpp"
#include "app/commands.hpp"
#include "app/memory_advice.hpp"
#include "app/plan_report.hpp"
#include "app/plan_search.hpp"
#include "app/progress.hpp"
#include "app/work_limit.hpp"
#include "report/output.hpp"
#include "scenario/load.hpp"

namespace cpsim::app {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

struct PlanArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json;
  std::string memory_budget;
  std::string max_memory;
  plan::Options opt;
  int top = 10;
  bool progress = false;
};

nlohmann::json candidate_json(const plan::Candidate& c) {
  auto num = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(); };
  return {{"label", c.label}, {"status", c.status}, {"why", c.why}, {"sets", c.sets}, {"axes", c.axis_values},
          {"tp", c.tp}, {"cp", c.cp}, {"pp", c.pp}, {"dp", c.dp}, {"virtual_stages", c.vstages},
          {"micro_batches", c.micro_batches}, {"zero_stage", c.zero_stage},
          {"peak_bytes", c.peak_bytes}, {"attention_layer_s", num(c.attention_layer_s)},
          {"lower_bound_step_s", num(c.estimate_s)}, {"analytic_step_s", num(c.analytic_s)}, {"simgrid_step_s", num(c.simgrid_s)},
          {"tokens_per_step", c.tokens_per_step}, {"tokens_per_s", num(c.tokens_per_s())}};
}

}  // namespace

void register_plan(CLI::App& app, int& rc) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "search TP/CP/PP/DP, virtual stages, scheme, layout, recompute and ZeRO for the fastest layout that fits");
  cmd->add_option("scenario", args->scenario, "scenario YAML file (model, sequence length, platform)")->required();
  cmd->add_option("--set", args->sets, "override a scenario key: key.path=value (repeatable)");
  cmd->add_option("--gpus", args->opt.gpus, "GPUs to fill (tp*cp*pp*dp = N; nodes follow)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--budget", args->opt.budget,
                  "whole-step simulations at most, best lower bound first (default 48)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--memory-budget", args->memory_budget,
                  "per-GPU memory a layout may use, e.g. 70GB or 100% (default: 95% of the GPU's memory)");
  cmd->add_flag("--progress", args->progress,
                "show the search's progress on stderr even when it is not a terminal (one line per stage)");
  cmd->add_option("--max-memory", args->max_memory,
                  "this machine's memory for the simulations, e.g. 16GiB: the children running at once "
                  "share it, and a layout whose graph needs more is not simulated (default: three quarters "
                  "of it for those at once, half for one)");
  cmd->add_option("--verify", args->opt.verify, "best layouts re-simulated with SimGrid, of those whose graph it can hold (default 3)")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--global-batch", args->opt.global_batch,
                  "sequences per step held fixed (default: free, 4 x pp micro-batches per replica)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-j,--jobs", args->opt.jobs, "child processes at once (default 2)")->check(CLI::Range(1, 1024));
  cmd->add_option("--top", args->top, "layouts in the table (default 10)")->check(CLI::Range(1, 100000));
  cmd->add_option("--json", args->json, "write every candidate, its status and why it lost, as JSON");
  cmd->callback([args, &rc] {
    const auto t0 = std::chrono::steady_clock::now();
    plan::Options opt = args->opt;
    plan::Result res;
    try {
      const std::string& mb = args->memory_budget;
      if (!mb.empty() && mb.back() == '%') {
        size_t used = 0;
        const double pct = std::stod(mb.substr(0, mb.size() - 1), &used);
        if (used != mb.size() - 1 || !(pct > 0 && pct <= 100))
          throw std::invalid_argument("expected a percentage of the GPU's memory in (0, 100], got '" + mb + "'");
        opt.memory_budget_fraction = pct / 100;
      } else if (!mb.empty()) {
        opt.memory_budget_bytes = scenario::parse_bytes(mb);
      }
    } catch (const std::exception& e) {
      std::cerr << "error: --memory-budget: " << e.what() << "\n";
      rc = 2;
      return;
    }
    try {
      // Unset stays 0: the search reads the default (CPSIM_MAX_MEMORY or half this machine's
      // memory) and says it is the default. An invalid CPSIM_MAX_MEMORY is an input error here.
      if (args->max_memory.empty()) default_max_memory();
      else opt.max_memory_bytes = parse_memory_limit(args->max_memory);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
      return;
    }
    scenario::Scenario sc;
    Progress progress(args->progress || progress_wanted(false), !stderr_is_terminal());
    opt.progress = &progress;
    try {
      sc = scenario::load_scenario(args->scenario, args->sets);
      res = plan::search(args->scenario, args->sets, opt);
      progress.finish();
    } catch (const scenario::InputError& e) {
      std::cerr << e.what() << "\n";
      rc = 2;
      return;
    } catch (const std::invalid_argument& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
      return;
    } catch (const std::exception& e) {
      std::cerr << "plan failed: " << e.what() << "\n";
      rc = 1;
      return;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::map<std::string, int> counts;
    for (const auto& c : res.all) counts[c.status]++;
    std::cout << "cpsim plan: " << sc.model.name << ", " << sc.training.seq_len << " tokens, " << opt.gpus
              << " GPUs (" << sc.platform.name << ", " << res.nodes << " node" << (res.nodes > 1 ? "s" : "")
              << "): " << res.all.size() << " candidates from " << res.structures << " layouts\n";
    std::cout << "  invalid " << counts["invalid"] << ", out of memory " << counts["oom"]
              << ", dominated (fit with less recompute/sharding) " << counts["dominated"]
              << ", scheme screened out " << counts["screened"]
              << ", cannot win (lower bound) " << counts["bounded"] << ", over budget " << counts["budget"]
              << ", too big to simulate " << counts["too_big"] << ", failed " << counts["failed"]
              << ", ranked " << counts["ranked"] << "\n";
    std::cout << "  runs: " << res.attention_runs << " attention layers, " << res.compute_probes
              << " layer builds for the compute bound and " << res.step_runs
              << " steps (analytic), " << res.simgrid_runs << " steps (SimGrid); " << fmt("%.1f s wall", wall)
              << fmt(" (enumeration and memory %.1f s", res.stage_wall_s[0])
              << fmt(", attention layers %.1f s", res.stage_wall_s[1]) << fmt(", steps %.1f s", res.stage_wall_s[2])
              << fmt(", SimGrid %.1f s)\n", res.stage_wall_s[3]);
    const double capacity = sc.platform.gpu.memory_bytes;
    std::cout << "  memory budget " << fmt("%.1f GB", res.memory_budget_bytes / 1e9) << " per GPU"
              << (opt.memory_budget_bytes > 0 ? std::string(" (--memory-budget)")
                                              : fmt(" (%.0f %%", 100 * opt.memory_budget_fraction) +
                                                    fmt(" of %.1f GB; --memory-budget)", capacity / 1e9))
              << "; searched beyond the layout: "
              << (res.axes.empty() ? std::string("nothing") : join(res.axes, ", ")) << "\n";
    for (const auto& n : res.axes_not_searched) std::cout << "  not searched: " << n << "\n";
    std::cout << plan::ranked_table(res, args->top, sc.platform.gpu.peak_flops, opt.gpus, capacity);
    std::cout.flush();
    if (!res.ranked.empty()) {
      const auto& best = res.all[res.ranked.front()];
      std::cout << "best: " << run_line(args->scenario, best.sets) << "\n";
      // A layout faster by the analytic engine that SimGrid did not verify (--verify, or its full
      // graph over --max-memory) is the next thing to try: say which, and why it is not first.
      for (size_t k = 1; k < res.ranked.size(); ++k) {
        const auto& c = res.all[res.ranked[k]];
        if (c.simgrid_s > 0 || !(best.simgrid_s > 0) || !(c.tokens_per_s() > best.tokens_per_s())) continue;
        std::cout << "faster by the analytic engine, not verified: " << run_line(args->scenario, c.sets) << "\n  ("
                  << c.why << ")\n";
        break;
      }
    } else {
      std::cout << "no layout fits and runs; see the reasons below\n";
    }
    std::cout << plan::why_lost(res);
    if (!args->json.empty()) {
      nlohmann::json j;
      j["scenario"] = args->scenario;
      j["gpus"] = opt.gpus;
      j["nodes"] = res.nodes;
      j["wall_s"] = wall;
      j["stage_wall_s"] = {{"enumeration_and_memory", res.stage_wall_s[0]}, {"attention_layers", res.stage_wall_s[1]},
                           {"steps", res.stage_wall_s[2]}, {"simgrid", res.stage_wall_s[3]}};
      // Each simulated layout's child wall seconds, apart from the candidates (which stay the
      // same bytes run after run): where the search's time went.
      nlohmann::json child_wall = nlohmann::json::array();
      for (const auto& c : res.all)
        if (c.analytic_wall_s >= 0 || c.simgrid_wall_s >= 0)
          child_wall.push_back({{"label", c.label},
                                {"analytic_s", c.analytic_wall_s >= 0 ? nlohmann::json(c.analytic_wall_s) : nlohmann::json()},
                                {"analytic_start_s", c.analytic_wall_s >= 0 ? nlohmann::json(c.analytic_start_s) : nlohmann::json()},
                                {"simgrid_s", c.simgrid_wall_s >= 0 ? nlohmann::json(c.simgrid_wall_s) : nlohmann::json()},
                                {"simgrid_start_s", c.simgrid_wall_s >= 0 ? nlohmann::json(c.simgrid_start_s) : nlohmann::json()}});
      j["child_wall_s"] = child_wall;
      j["counts"] = counts;
      j["memory_budget_bytes"] = res.memory_budget_bytes;
      j["axes"] = res.axes;
      j["axes_not_searched"] = res.axes_not_searched;
      j["compute_probes"] = res.compute_probes;
      j["capacity_bytes"] = sc.platform.gpu.memory_bytes;
      nlohmann::json ranked = nlohmann::json::array(), all = nlohmann::json::array();
      for (size_t i : res.ranked) ranked.push_back(candidate_json(res.all[i]));
      for (const auto& c : res.all) all.push_back(candidate_json(c));
      j["ranked"] = ranked;
      j["candidates"] = all;
      try {
        report::write_atomic(args->json, j.dump(1) + "\n");
      } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        rc = 1;
      }
    }
  });
}

}  // namespace cpsim::app
