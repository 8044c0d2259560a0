// `cpsim memory`: where the memory of each GPU goes, term by term and rank class by rank class,
// whether it fits, and the changes that make it fit (each re-evaluated, the fitting ones
// simulated with the analytic engine so that "cheapest" means the shortest step).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/text_format.hpp"
#include "log/log.hpp"
#include "app/commands.hpp"
#include "app/memory_advice.hpp"
#include "app/simulate.hpp"
#include "model/allocator.hpp"
#include "model/backward_peak.hpp"
#include "model/memory.hpp"
#include "model/memory_verdict.hpp"
#include "report/output.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"
#include "support/shell_quote.hpp"
#include "schedule/attention.hpp"

namespace cpsim::app {

namespace {

struct MemoryArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string json;
  int top = 5;
  int jobs = 1;
  bool no_simulate = false;
};

std::string pad(std::string s, size_t w) {
  if (s.size() < w) s += std::string(w - s.size(), ' ');
  return s;
}

const char* recompute_name(scenario::Recompute r) { return scenario::name_of(r, scenario::kRecomputeNames); }

nlohmann::json estimate_json(const model::MemoryEstimate& m) {
  nlohmann::json terms = nlohmann::json::array();
  for (const auto& t : m.terms)
    terms.push_back({{"name", t.name}, {"bytes", t.bytes}, {"allocated_bytes", t.allocated},
                     {"reserved_bytes", t.reserved}, {"source", t.source}});
  return {{"terms", terms}, {"allocated_bytes", m.allocated_bytes}, {"peak_bytes", m.peak_bytes},
          {"capacity_bytes", m.capacity_bytes}, {"fits", m.fits}, {"verdict", m.verdict}};
}

/// The table: one row per term (in the order of the first class that has it), two columns per
/// rank class (what PyTorch's allocator counts as allocated, and reserved), GB, and the policy
/// or key that produced the term.
std::string table(const std::vector<model::RankClassMemory>& classes) {
  // The model's terms first, then what every GPU holds beside them (cuBLAS, CUDA context, NCCL)
  // and the allocator's free blocks, whichever class lists them first.
  std::vector<std::string> names, sources;
  for (int fixed = 0; fixed < 2; ++fixed)
    for (const auto& c : classes)
      for (const auto& t : c.memory.terms) {
        const bool is_fixed = t.outside_allocator || t.name == model::kFragmentationTerm || t.name == model::kCublasTerm;
        if (is_fixed != (fixed == 1) || std::find(names.begin(), names.end(), t.name) != names.end()) continue;
        names.push_back(t.name);
        sources.push_back(t.source + (t.outside_allocator ? " [outside the allocator]" : ""));
      }
  size_t w = 12;
  for (const auto& n : names) w = std::max(w, n.size() + 2);
  // Per class an allocated and a reserved column of 10, under the class's name.
  auto cw = [](const model::RankClassMemory& c) { return std::max<size_t>(10, c.name.size() > 12 ? c.name.size() - 12 : 0); };
  auto rjust = [](const std::string& v, size_t width) { return std::string(width > v.size() ? width - v.size() : 0, ' ') + v; };
  std::string os = "  " + pad("", w);
  for (const auto& c : classes) os += "  " + pad(c.name, cw(c) + 12);
  os.erase(os.find_last_not_of(' ') + 1);
  os += "\n  " + pad("per GPU, GB", w);
  for (const auto& c : classes) os += "  " + rjust("allocated", cw(c)) + "  " + rjust("reserved", 10);
  os += "  source\n";
  auto row = [&](const std::string& name, auto value, const std::string& tail) {
    os += "  " + pad(name, w);
    for (const auto& c : classes) {
      const auto [a, r] = value(c);
      os += "  " + rjust(a, cw(c)) + "  " + rjust(r, 10);
    }
    os += (tail.empty() ? "" : "  " + tail) + "\n";
  };
  using Pair = std::pair<std::string, std::string>;
  for (size_t i = 0; i < names.size(); ++i)
    row(names[i], [&](const model::RankClassMemory& c) -> Pair {
      for (const auto& t : c.memory.terms)
        if (t.name == names[i])
          return {t.name == model::kFragmentationTerm ? std::string("-") : fmt("%.2f", t.allocated / 1e9),
                  fmt("%.2f", t.reserved / 1e9)};
      return {"-", "-"};
    }, sources[i]);
  row("total", [](const model::RankClassMemory& c) -> Pair {
    return {fmt("%.2f", c.memory.allocated_bytes / 1e9), fmt("%.2f", c.memory.peak_bytes / 1e9)};
  }, "");
  row("capacity", [](const model::RankClassMemory& c) -> Pair {
    return {"", fmt("%.2f", c.memory.capacity_bytes / 1e9)};
  }, "");
  row("fits", [](const model::RankClassMemory& c) -> Pair {
    return {"", model::memory_fit_word(model::memory_fit(c.memory.peak_bytes, c.memory.capacity_bytes))};
  }, "");
  os += "  allocated: torch.cuda.max_memory_allocated's view (blocks rounded to 512 B); reserved: max_memory_reserved's\n"
        "  (whole allocator segments and fragmentation) plus the CUDA context and NCCL buffers; the reserved total is\n"
        "  the peak that must fit in HBM, the one `run` and `plan` check.\n";
  return os;
}

}  // namespace

void register_memory(CLI::App& app, int& rc) {
  auto args = std::make_shared<MemoryArgs>();
  auto* cmd = app.add_subcommand(
      "memory", "per-GPU memory by term and rank class, the verdict, and the changes that make it fit");
  cmd->add_option("scenario", args->scenario, "scenario YAML file")->required();
  cmd->add_option("--set", args->sets, "override a scenario key: key.path=value (repeatable)");
  cmd->add_option("--json", args->json, "write the table, verdict and changes as JSON");
  cmd->add_option("--top", args->top, "changes to list (default 5)")->check(CLI::Range(0, 1000));
  cmd->add_option("-j,--jobs", args->jobs, "child processes at once for the step-time runs (default 1)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--no-simulate", args->no_simulate,
                "do not simulate the fitting changes (memory model only)");
  cmd->callback([args, &rc] {
    scenario::Scenario sc;
    try {
      sc = scenario::load_scenario(args->scenario, args->sets);
    } catch (const scenario::InputError& e) {
      std::cerr << e.what() << "\n";
      rc = 2;
      return;
    }
    const auto classes = model::memory_by_rank_class(sc);
    const model::MemoryEstimate peak = model::peak_rank_memory(sc);
    std::vector<MemoryChange> changes;
    if (!peak.fits || !args->json.empty()) changes = memory_changes(args->scenario, args->sets, sc);
    if (static_cast<int>(changes.size()) > args->top) changes.resize(static_cast<size_t>(args->top));

    // Step times with the analytic engine, the scenario itself first, so a change's cost reads
    // as a slowdown. Each in its own child (the SimGrid engine must stay unbound).
    double base_step = -1;
    MeshFit mesh;  // when nothing listed fits: the fewest GPUs that would hold it
    if (!args->no_simulate && !peak.fits) {
      std::vector<scenario::Scenario> runs;
      std::vector<size_t> which;
      scenario::Scenario b = sc;
      b.simulation.engine = scenario::EngineKind::Analytic;
      runs.push_back(b);
      for (size_t i = 0; i < changes.size(); ++i) {
        if (!changes[i].memory.fits) continue;
        auto sets = args->sets;
        sets.insert(sets.end(), changes[i].sets.begin(), changes[i].sets.end());
        sets.push_back("simulation.engine=analytic");
        try {
          runs.push_back(scenario::load_scenario(args->scenario, sets));
          which.push_back(i);
        } catch (const std::exception&) {
        }
      }
      try {
        const auto t = run_step_times(runs, args->jobs);
        base_step = t[0];
        for (size_t k = 0; k < which.size(); ++k) changes[which[k]].step_time_s = t[k + 1];
      } catch (const std::exception& e) {
        log::warn(std::string("step-time runs failed: ") + e.what());
      }
    }

    const auto& p = sc.parallel;
    const double base_seqs = static_cast<double>(p.dp) * sc.training.micro_batch * sc.training.micro_batches;
    std::cout << "cpsim memory: " << sc.name << "  (" << sc.model.name << ", " << sc.training.seq_len
              << " tokens, " << sc.platform.name << " x" << sc.platform.nodes << ", tp" << p.tp << " cp"
              << p.cp << " pp" << p.pp << " dp" << p.dp
              // HSDP: the dp ranks as torchtitan's mesh holds them, replicas x shard group.
              << (p.dp_replicate > 1 ? " (HSDP " + std::to_string(p.dp_replicate) + " x " +
                                           std::to_string(p.dp_shard()) + ": replicas x shard)"
                                     : std::string())
              << ", " << schedule::scheme_name(p.attention)
              << ", ZeRO " << p.zero_stage << ", recompute " << recompute_name(sc.training.recompute)
              << ", micro-batch " << sc.training.micro_batch << ")\n";
    std::cout << table(classes);
    std::cout << "verdict: " << peak.verdict << "\n";
    if (!peak.fits) {
      std::cout << "changes that make it fit (each re-evaluated by the memory model"
                << (args->no_simulate ? "" : "; step time from the analytic engine") << "):\n";
      if (base_step > 0) std::cout << "  as given (OOM)" << fmt("  step %.3f s\n", base_step);
      bool any = false;
      size_t w = 44;  // the changes' column: as wide as the longest, so the figures line up
      for (const auto& c : changes) w = std::max(w, c.what.size());
      for (const auto& c : changes) {
        if (!c.memory.fits) continue;
        any = true;
        const bool tight = model::memory_fit(c.memory.peak_bytes, c.memory.capacity_bytes) == model::MemoryFit::Tight;
        std::cout << "  " << pad(c.what, w) << fmt(" %6.1f GB", c.memory.peak_bytes / 1e9) << (tight ? " (tight)" : "")
                  << "  " << c.gpus << " GPUs";
        if (c.step_time_s > 0) {
          // Changes such as PP bring more micro-batches: compare time per sequence.
          const double per_seq = c.step_time_s / c.sequences_per_step;
          std::cout << fmt("  step %.3f s", c.step_time_s);
          if (c.sequences_per_step != base_seqs) std::cout << fmt(" for %.0f sequences", c.sequences_per_step);
          if (base_step > 0) std::cout << fmt(" (x%.2f time per sequence)", per_seq / (base_step / base_seqs));
        }
        std::cout << "\n      " << run_line(args->scenario, c.sets) << "\n";
      }
      if (!any) {
        std::cout << "  none of the single or paired changes fits; closest:\n";
        for (const auto& c : changes)
          std::cout << "  " << pad(c.what, w) << fmt(" %6.1f GB", c.memory.peak_bytes / 1e9)
                    << fmt(" (saves %.1f GB)", (peak.peak_bytes - c.memory.peak_bytes) / 1e9) << "\n";
        mesh = smallest_fitting_mesh(args->scenario, args->sets, sc);
        if (mesh.found) {
          std::cout << "smallest mesh that fits with " << fmt("%.0f %%", 100 * model::kTightHeadroom)
                    << " headroom (memory model): " << mesh.gpus << " GPUs (" << mesh.nodes << " node"
                    << (mesh.nodes > 1 ? "s" : "") << "): TP " << mesh.tp << ", CP " << mesh.cp << ", PP "
                    << mesh.pp << ", DP " << mesh.dp << ", ZeRO " << mesh.zero_stage << ", recompute "
                    << recompute_name(mesh.recompute) << fmt(": %.1f GB", mesh.memory.peak_bytes / 1e9)
                    << fmt(" of %.1f GB\n", mesh.memory.capacity_bytes / 1e9) << "      "
                    << run_line(args->scenario, mesh.sets) << "\n  the fastest layout on " << mesh.gpus
                    << " GPUs: cpsim plan " << support::shell_quote(args->scenario) << " --gpus " << mesh.gpus << "\n";
        } else {
          std::cout << "no mesh of up to " << mesh.largest_gpus_tried << " GPUs fits it (memory model)\n";
        }
      }
    }
    if (!args->json.empty()) {
      nlohmann::json j;
      j["name"] = sc.name;
      j["scenario"] = args->scenario;
      j["parallel"] = {{"tp", p.tp}, {"cp", p.cp}, {"pp", p.pp}, {"dp", p.dp}, {"zero_stage", p.zero_stage},
                       {"scheme", schedule::scheme_name(p.attention)}};
      j["training"] = {{"seq_len", sc.training.seq_len}, {"recompute", recompute_name(sc.training.recompute)},
                       {"micro_batch", sc.training.micro_batch}};
      j["platform"] = {{"name", sc.platform.name}, {"nodes", sc.platform.nodes}};
      nlohmann::json cl = nlohmann::json::array();
      for (const auto& c : classes) {
        auto e = estimate_json(c.memory);
        e["name"] = c.name;
        e["first_stage"] = c.first_stage;
        e["last_stage"] = c.last_stage;
        cl.push_back(e);
      }
      j["classes"] = cl;
      j["peak"] = estimate_json(peak);
      // The fixed terms by mechanism, for checks against component measurements (validation/memory).
      std::vector<model::NcclGroupBuffers> groups;
      const double nccl = model::nccl_buffer_bytes(sc, &groups);
      nlohmann::json by_group = nlohmann::json::object();
      for (const auto& g : groups) by_group[g.group] = g.bytes;
      double ws_tensors = 1;
      const model::AllocatorSettings al = model::allocator_settings(sc);
      j["components"] = {{"cuda_context_bytes", model::cuda_context_bytes(sc)},
                         {"nccl_buffer_bytes", nccl},
                         {"nccl_buffer_bytes_by_group", by_group},
                         {"cublas_workspace_bytes", model::cublas_workspace_bytes(sc, &ws_tensors)},
                         {"expandable_segments", al.expandable_segments},
                         {"fragmentation", al.fragmentation},
                         {"allocator_source", al.source}};
      // The backward's transient buffers by moment (model/backward_peak.hpp), whether or not
      // they are the peak: the loss's and one block's, split into its attention and MLP parts.
      const model::BackwardPeak bp = model::backward_peak(sc);
      j["components"]["backward_loss_bytes"] = bp.loss.bytes;
      j["components"]["backward_block_bytes"] = bp.block_bytes;
      j["components"]["backward_attention_bytes"] = bp.attention_bytes;
      j["components"]["backward_mlp_bytes"] = bp.mlp_bytes;
      if (base_step > 0) j["step_time_s"] = base_step;
      nlohmann::json ch = nlohmann::json::array();
      for (const auto& c : changes)
        ch.push_back({{"what", c.what}, {"sets", c.sets}, {"peak_bytes", c.memory.peak_bytes},
                      {"fits", c.memory.fits}, {"gpus", c.gpus}, {"sequences_per_step", c.sequences_per_step},
                      {"step_time_s", c.step_time_s > 0 ? nlohmann::json(c.step_time_s) : nlohmann::json()}});
      j["changes"] = ch;
      if (mesh.found)
        j["smallest_mesh"] = {{"gpus", mesh.gpus}, {"nodes", mesh.nodes}, {"tp", mesh.tp}, {"cp", mesh.cp},
                              {"pp", mesh.pp}, {"dp", mesh.dp}, {"zero_stage", mesh.zero_stage},
                              {"recompute", recompute_name(mesh.recompute)}, {"sets", mesh.sets},
                              {"peak_bytes", mesh.memory.peak_bytes}};
      try {
        report::write_atomic(args->json, j.dump(2) + "\n");
      } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        rc = 1;
      }
    }
  });
}

}  // namespace cpsim::app
