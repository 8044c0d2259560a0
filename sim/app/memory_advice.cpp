#include "app/memory_advice.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "model/memory_verdict.hpp"
#include "scenario/enum_names.hpp"
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
  // TP stays inside a node (its all-reduces sit on the critical path; `cpsim plan` alike).
  if (2 * p.tp <= std::max(1, sc.platform.gpus_per_node)) grow("tp", "TP", p.tp, {});
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

std::vector<int> divisors(int n) {
  std::vector<int> d, high;
  for (int i = 1; static_cast<int64_t>(i) * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i) high.push_back(n / i);
    }
  d.insert(d.end(), high.rbegin(), high.rend());
  return d;
}

/// A saving under this prints as 0.0 GB in every table: no saving.
constexpr double kNoSaving = 0.05e9;

/// Whether two changes set one key (other than the nodes and micro-batches that follow from
/// the mesh): "ZeRO 1 -> 2" and "ZeRO 1 -> 3" are alternatives, not a pair.
bool same_key(const MemoryChange& a, const MemoryChange& b) {
  auto key = [](const std::string& s) { return s.substr(0, s.find('=')); };
  for (const auto& x : a.sets)
    for (const auto& y : b.sets) {
      const std::string k = key(x);
      if (k == key(y) && k != "platform.nodes" && k != "training.micro_batches") return true;
    }
  return false;
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
  const double base = model::peak_rank_memory(sc).peak_bytes;
  const auto one = singles(sc);
  std::vector<MemoryChange> valid;
  for (auto m : one)
    if (evaluate(path, base_sets, m) && base - m.memory.peak_bytes >= kNoSaving) valid.push_back(m);
  ok = valid;
  const bool any_fits = std::any_of(ok.begin(), ok.end(), [](const auto& m) { return m.memory.fits; });
  if (combine && !any_fits) {
    for (size_t i = 0; i < valid.size(); ++i)
      for (size_t j = i + 1; j < valid.size(); ++j) {
        if (same_key(valid[i], valid[j])) continue;
        auto m = merge(valid[i], valid[j]);
        const double alone = std::max(base - valid[i].memory.peak_bytes, base - valid[j].memory.peak_bytes);
        if (evaluate(path, base_sets, m) && base - m.memory.peak_bytes >= alone + kNoSaving) ok.push_back(m);
      }
  }
  std::stable_sort(ok.begin(), ok.end(), [](const MemoryChange& a, const MemoryChange& b) {
    if (a.memory.fits != b.memory.fits) return a.memory.fits;
    if (a.gpus != b.gpus) return a.gpus < b.gpus;
    return a.memory.peak_bytes < b.memory.peak_bytes;
  });
  return ok;
}

MeshFit smallest_fitting_mesh(const std::string& path, const std::vector<std::string>& base_sets,
                              const scenario::Scenario& sc) {
  MeshFit out;
  const int gpn = std::max(1, sc.platform.gpus_per_node);
  const double cap = sc.platform.gpu.memory_bytes;
  const int layers = std::max(1, sc.model.layers);
  // Whole nodes up to kMaxNodes, at most kMaxEvaluations memory estimates (microseconds each):
  // a model that fits nowhere below that is past what the memory model's layouts can hold.
  constexpr int kMaxNodes = 4096;
  constexpr long kMaxEvaluations = 2'000'000;
  long evaluations = 0;
  const scenario::Recompute given_rc = sc.training.recompute;
  std::vector<scenario::Recompute> rcs = {given_rc};
  if (given_rc != scenario::Recompute::Full) rcs.push_back(scenario::Recompute::Full);
  for (int nodes = 1; nodes <= kMaxNodes && evaluations < kMaxEvaluations; ++nodes) {
    const int w = nodes * gpn;
    out.largest_gpus_tried = w;
    struct Fit {
      int z, rc, tp, pp, cp;
      scenario::Scenario s;
    };
    std::vector<Fit> fits;
    for (int tp : divisors(gpn)) {
      if (w % tp) continue;
      for (int pp : divisors(w / tp)) {
        if (pp > layers) break;
        for (int cp : divisors(w / tp / pp)) {
          for (int z = sc.parallel.zero_stage; z <= 3; ++z)
            for (size_t r = 0; r < rcs.size(); ++r) {
              scenario::Scenario s = sc;
              s.parallel.tp = tp;
              s.parallel.cp = cp;
              s.parallel.pp = pp;
              s.parallel.dp = w / tp / pp / cp;
              // HSDP's replicas where they still divide the new dp, else plain FSDP.
              if (s.parallel.dp % s.parallel.dp_replicate != 0) s.parallel.dp_replicate = 1;
              s.parallel.zero_stage = z;
              s.parallel.virtual_stages = 1;
              s.training.recompute = rcs[r];
              if (pp > 1) s.training.micro_batches = std::max(sc.training.micro_batches, 4 * pp);
              s.platform.nodes = nodes;
              ++evaluations;
              if (model::memory_fit(model::peak_rank_memory(s).peak_bytes, cap) == model::MemoryFit::Fits)
                fits.push_back({z, static_cast<int>(r), -tp, pp, cp, s});
            }
        }
      }
    }
    std::stable_sort(fits.begin(), fits.end(), [](const Fit& a, const Fit& b) {
      return std::tie(a.z, a.rc, a.tp, a.pp, a.cp) < std::tie(b.z, b.rc, b.tp, b.pp, b.cp);
    });
    for (const Fit& f : fits) {
      const auto& p = f.s.parallel;
      std::vector<std::string> sets = {"platform.nodes=" + str(nodes), "parallel.tp=" + str(p.tp),
                                       "parallel.cp=" + str(p.cp), "parallel.pp=" + str(p.pp),
                                       "parallel.dp=" + str(p.dp), "parallel.virtual_stages=1",
                                       "parallel.zero_stage=" + str(p.zero_stage),
                                       std::string("training.recompute=") +
                                           scenario::name_of(f.s.training.recompute, scenario::kRecomputeNames)};
      if (p.pp > 1) sets.push_back("training.micro_batches=" + str(f.s.training.micro_batches));
      MemoryChange m = change("", sets);
      // The loader's own checks (heads by TP, tokens by CP, ...) decide what the loop skipped.
      if (!evaluate(path, base_sets, m) ||
          model::memory_fit(m.memory.peak_bytes, m.memory.capacity_bytes) != model::MemoryFit::Fits)
        continue;
      out.found = true;
      out.gpus = w;
      out.nodes = nodes;
      out.tp = p.tp;
      out.cp = p.cp;
      out.pp = p.pp;
      out.dp = p.dp;
      out.zero_stage = p.zero_stage;
      out.recompute = f.s.training.recompute;
      out.sets = m.sets;
      out.memory = m.memory;
      return out;
    }
  }
  return out;
}

}  // namespace cpsim::app
