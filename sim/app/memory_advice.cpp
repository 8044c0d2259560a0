#include "app/memory_advice.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "scenario/load.hpp"
#include "support/shell_quote.hpp"

namespace cpsim::app {

namespace {

std::string str(int v) { return std::to_string(v); }

/// The nodes a world of `gpus` GPUs needs, at least the platform's own.
int nodes_for(const scenario::Scenario& sc, int64_t gpus) {
  const int per = std::max(1, sc.platform.gpus_per_node);
  return std::max<int>(sc.platform.nodes, static_cast<int>((gpus + per - 1) / per));
}

MemoryChange change(std::string what, std::vector<std::string> sets) {
  MemoryChange m;
  m.what = std::move(what);
  m.sets = std::move(sets);
  return m;
}

std::vector<MemoryChange> singles(const scenario::Scenario& sc) {
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const int64_t world = int64_t{p.tp} * p.cp * p.pp * p.dp;
  std::vector<MemoryChange> c;
  auto grow = [&](const char* key, const char* label, int from, std::vector<std::string> extra) {
    const int to = 2 * from;
    const int nodes = nodes_for(sc, 2 * world);
    MemoryChange m;
    m.what = std::string(label) + " " + str(from) + " -> " + str(to);
    m.sets = {std::string("parallel.") + key + "=" + str(to)};
    for (auto& e : extra) m.sets.push_back(std::move(e));
    if (nodes != sc.platform.nodes) {
      m.what += " (" + str(nodes) + " nodes)";
      m.sets.push_back("platform.nodes=" + str(nodes));
    }
    c.push_back(std::move(m));
  };
  // ZeRO shards optimizer states (stage 1), gradients (2), weights (3) over DP x CP
  // (Rajbhandari et al. 2020); each stage adds communication, so the lowest that fits is best.
  for (int z = p.zero_stage + 1; z <= 3; ++z)
    c.push_back(change("ZeRO stage " + str(p.zero_stage) + " -> " + str(z), {"parallel.zero_stage=" + str(z)}));
  if (tr.recompute != scenario::Recompute::Full)
    c.push_back(change("full activation recomputation", {"training.recompute=full"}));
  if (p.tp > 1 && !p.sequence_parallel)
    c.push_back(change("sequence parallelism", {"parallel.sequence_parallel=true"}));
  if (tr.micro_batch > 1)
    c.push_back(change("micro-batch " + str(tr.micro_batch) + " -> 1 (same tokens per step)",
                       {"training.micro_batch=1", "training.micro_batches=" + str(tr.micro_batch * tr.micro_batches)}));
  // Chunked loss (never materialising the full-vocabulary logits) is a scenario key some builds
  // know; the loader drops the candidate when it does not.
  c.push_back(change("chunked loss", {"training.loss=chunked"}));
  grow("cp", "CP", p.cp, {});
  grow("tp", "TP", p.tp, {});
  if (2 * p.pp <= sc.model.layers)
    grow("pp", "PP", p.pp, {"training.micro_batches=" + str(std::max(tr.micro_batches, 4 * p.pp))});
  return c;
}

/// Merges two changes; platform.nodes takes the larger, a key set twice keeps the second.
MemoryChange merge(const MemoryChange& a, const MemoryChange& b) {
  MemoryChange m;
  m.what = a.what + " + " + b.what;
  std::map<std::string, std::string> kv;
  std::vector<std::string> order;
  for (const auto* src : {&a, &b})
    for (const auto& s : src->sets) {
      const auto eq = s.find('=');
      const std::string k = s.substr(0, eq), v = s.substr(eq + 1);
      if (!kv.count(k)) order.push_back(k);
      if (k == "platform.nodes" && kv.count(k))
        kv[k] = str(std::max(std::stoi(kv[k]), std::stoi(v)));
      else
        kv[k] = v;
    }
  for (const auto& k : order) m.sets.push_back(k + "=" + kv[k]);
  return m;
}

bool evaluate(const std::string& path, const std::vector<std::string>& base_sets, MemoryChange& m) {
  auto sets = base_sets;
  sets.insert(sets.end(), m.sets.begin(), m.sets.end());
  try {
    const auto sc = scenario::load_scenario(path, sets);
    m.memory = model::peak_rank_memory(sc);
    m.gpus = sc.parallel.tp * sc.parallel.cp * sc.parallel.pp * sc.parallel.dp;
    m.sequences_per_step = static_cast<double>(sc.parallel.dp) * sc.training.micro_batch * sc.training.micro_batches;
    return true;
  } catch (const std::exception&) {
    return false;  // a key this build does not know, or a layout the loader rejects
  }
}

}  // namespace

std::string sets_text(const std::vector<std::string>& sets) {
  std::string s;
  for (const auto& x : sets) {
    if (!s.empty()) s += ' ';  // appended: GCC 12 -O3's false -Wrestrict on "..." + std::string&& (bug 105651)
    s += "--set ";
    s += support::shell_quote(x);
  }
  return s;
}

std::string run_line(const std::string& scenario_path, const std::vector<std::string>& sets) {
  const std::string s = sets_text(sets);
  return "cpsim run " + support::shell_quote(scenario_path) + (s.empty() ? "" : " " + s);
}

std::vector<MemoryChange> memory_changes(const std::string& path,
                                         const std::vector<std::string>& base_sets,
                                         const scenario::Scenario& sc, bool combine) {
  std::vector<MemoryChange> ok;
  const auto one = singles(sc);
  std::vector<MemoryChange> valid;
  for (auto m : one)
    if (evaluate(path, base_sets, m)) valid.push_back(m);
  ok = valid;
  const bool any_fits = std::any_of(ok.begin(), ok.end(), [](const auto& m) { return m.memory.fits; });
  if (combine && !any_fits) {
    for (size_t i = 0; i < valid.size(); ++i)
      for (size_t j = i + 1; j < valid.size(); ++j) {
        auto m = merge(valid[i], valid[j]);
        if (evaluate(path, base_sets, m)) ok.push_back(m);
      }
  }
  std::stable_sort(ok.begin(), ok.end(), [](const MemoryChange& a, const MemoryChange& b) {
    if (a.memory.fits != b.memory.fits) return a.memory.fits;
    if (a.gpus != b.gpus) return a.gpus < b.gpus;
    return a.memory.peak_bytes < b.memory.peak_bytes;
  });
  return ok;
}

}  // namespace cpsim::app
