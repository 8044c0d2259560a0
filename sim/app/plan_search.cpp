#include "app/plan_search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "app/layer_probe.hpp"
#include "app/plan_axes.hpp"
#include "app/plan_steps.hpp"
#include "app/simulate.hpp"
#include "app/work_limit.hpp"
#include "model/memory.hpp"
#include "model/transformer.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"
#include "schedule/attention.hpp"
#include "schedule/stage_builder.hpp"
#include "model/topology.hpp"

namespace cpsim::app::plan {

namespace {

using scenario::AttentionScheme;
using scenario::Layout;
using scenario::Recompute;

std::string str(int v) { return std::to_string(v); }

/// Layouts the axes beyond the layout are tried on (plan_axes.hpp): the best two, so that a
/// change of precision or stack that helps one layout more than another can reorder them
/// (and the best with TP > 1 for the overlap), at 1 + sum of (values - 1) steps a layout at
/// most (7 on an H100 with every axis free).
constexpr size_t kAxisLayouts = 2;

/// FlashAttention's query/key block (128 rows on Hopper and Ampere, flash_fwd_kernel's kBlockM).
constexpr int kAttentionTile = 128;

const char* layout_key(Layout l) { return scenario::name_of(l, scenario::kLayoutNames); }
const char* scheme_key(AttentionScheme s) { return scenario::name_of(s, scenario::kSchemeNames); }
const char* recompute_key(Recompute r) { return scenario::name_of(r, scenario::kRecomputeNames); }

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

/// Attention variants for a CP degree: ring in every layout, all-gather in the two balanced
/// ones, Ulysses, USP at every proper Ulysses degree, the double ring at every proper inner size
/// when the CP group leaves the node (inside one node it is the plain ring).
std::vector<Candidate> attention_variants(int tp, int cp, int gpus_per_node) {
  std::vector<Candidate> v;
  auto add = [&](AttentionScheme s, Layout l, int u, int inner) {
    Candidate c;
    c.scheme = s;
    c.layout = l;
    c.ulysses_degree = u;
    c.inner_ring = inner;
    v.push_back(c);
  };
  if (cp == 1) {
    add(AttentionScheme::Ring, Layout::ZigZag, 0, 0);
    return v;
  }
  for (Layout l : {Layout::ZigZag, Layout::Contiguous, Layout::Striped}) add(AttentionScheme::Ring, l, 0, 0);
  for (Layout l : {Layout::ZigZag, Layout::Contiguous}) add(AttentionScheme::AllGather, l, 0, 0);
  add(AttentionScheme::Ulysses, Layout::ZigZag, 0, 0);
  for (int u : divisors(cp))
    if (u > 1 && u < cp) add(AttentionScheme::Usp, Layout::ZigZag, u, 0);
  if (static_cast<int64_t>(tp) * cp > gpus_per_node)
    for (int i : divisors(cp))
      if (i > 1 && i < cp) add(AttentionScheme::DoubleRing, Layout::ZigZag, 0, i);
  return v;
}

std::string scheme_label(const Candidate& c) {
  std::string s = scheme_key(c.scheme);
  if (c.scheme == AttentionScheme::Usp) s += "-u" + str(c.ulysses_degree);
  if (c.scheme == AttentionScheme::DoubleRing) s += "-i" + str(c.inner_ring);
  if (c.scheme == AttentionScheme::Ring || c.scheme == AttentionScheme::AllGather ||
      c.scheme == AttentionScheme::DoubleRing)
    s += std::string("-") + layout_key(c.layout);
  return s;
}

void finish_label(Candidate& c) {
  c.label = "tp" + str(c.tp) + " cp" + str(c.cp) + " pp" + str(c.pp) + " dp" + str(c.dp) + " v" +
            str(c.vstages) + " m" + str(c.micro_batches) + " " + (c.cp > 1 ? scheme_label(c) : "-") +
            " rc=" + recompute_key(c.recompute) + " z" + str(c.zero_stage) + axis_suffix(c.axis_values);
}

/// Overrides for the structure (without recompute and ZeRO).
std::vector<std::string> structure_sets(const Candidate& c, int nodes) {
  std::vector<std::string> s = {
      "platform.nodes=" + str(nodes),
      "parallel.tp=" + str(c.tp),
      "parallel.cp=" + str(c.cp),
      "parallel.pp=" + str(c.pp),
      "parallel.dp=" + str(c.dp),
      "parallel.virtual_stages=" + str(c.vstages),
      "training.micro_batches=" + str(c.micro_batches),
      std::string("parallel.attention.scheme=") + scheme_key(c.scheme),
      std::string("parallel.attention.layout=") + layout_key(c.layout),
  };
  if (c.scheme == AttentionScheme::Usp) s.push_back("parallel.attention.ulysses_degree=" + str(c.ulysses_degree));
  if (c.scheme == AttentionScheme::DoubleRing) s.push_back("parallel.attention.inner_ring=" + str(c.inner_ring));
  return s;
}

/// Model FLOPs per step and the recomputation's extra FLOPs as a factor: full recomputation
/// repeats the forward (4/3 of forward + backward); selective repeats the attention core only
/// (Korthikanti et al. 2022), 4 x pairs x H_q x d per full-attention layer.
void flops(const scenario::Scenario& sc, Candidate& c, double& factor) {
  const auto& m = sc.model;
  const double s = static_cast<double>(sc.training.seq_len);
  const double pairs = s * (s + 1) / 2;
  const double seqs = static_cast<double>(c.dp) * sc.training.micro_batch * c.micro_batches;
  c.model_flops = model::model_flops_per_step(m, sc.training.seq_len, seqs, pairs);
  c.tokens_per_step = s * seqs;
  const double attn = 4.0 * pairs * seqs * m.heads_q * m.head_dim *
                      model::count_layers(m, scenario::LayerKind::FullAttention);
  factor = c.recompute == Recompute::Full        ? 4.0 / 3.0
           : c.recompute == Recompute::Selective ? (c.model_flops + attn) / c.model_flops
                                                 : 1.0;
}

}  // namespace

double memory_budget(const Options& opt, double capacity_bytes) {
  return opt.memory_budget_bytes > 0 ? opt.memory_budget_bytes : opt.memory_budget_fraction * capacity_bytes;
}

double Candidate::tokens_per_s() const {
  const double t = step_s();
  return t > 0 ? tokens_per_step / t : 0;
}

Result search(const std::string& path, const std::vector<std::string>& sets, const Options& opt) {
  Result res;
  const double t_start = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  auto lap = [t = std::chrono::steady_clock::now()](double& into) mutable {
    const auto now = std::chrono::steady_clock::now();
    into = std::chrono::duration<double>(now - t).count();
    t = now;
  };
  const scenario::Scenario given = scenario::load_scenario(path, sets);
  const int gpn = std::max(1, given.platform.gpus_per_node);
  if (opt.gpus < 1) throw std::invalid_argument("--gpus must be at least 1");
  res.nodes = (opt.gpus + gpn - 1) / gpn;
  const int layers = given.model.layers;
  // The axes beyond the layout that the scenario leaves free; every layout first takes the
  // scenario's own value of each (plan_axes.hpp).
  const std::vector<Axis> axes = free_axes(path, sets, given, res.axes_not_searched);
  std::vector<std::string> own_values;
  for (const Axis& a : axes) {
    res.axes.push_back(a.name);
    own_values.push_back(a.values.front().label);
  }

  // Stage 1: structures through the loader.
  std::vector<Candidate> structures;
  std::vector<scenario::Scenario> loaded;
  for (int tp : divisors(opt.gpus)) {
    if (tp > gpn) continue;  // TP stays inside a node: its all-reduces sit on the critical path
    for (int cp : divisors(opt.gpus / tp))
      for (int pp : divisors(opt.gpus / tp / cp)) {
        const int dp = opt.gpus / tp / cp / pp;
        if (pp > layers) continue;
        int m = pp > 1 ? 4 * pp : std::max(1, given.training.micro_batches);
        if (opt.global_batch > 0) {
          const int per = dp * given.training.micro_batch;
          if (opt.global_batch % per != 0) continue;
          m = opt.global_batch / per;
        }
        // Fewer than two 128-token tiles per CP rank (FlashAttention's block; a zig-zag rank
        // holds two chunks): its kernels cannot fill a GPU, and its attention layer alone is
        // cp^2 ring transfers (cp 16,384: hundreds of millions of ops, tens of GB to simulate).
        const bool tiny = cp > 1 && given.training.seq_len / cp < 2 * kAttentionTile;
        for (int v : {1, 2}) {
          if (v > 1 && (pp == 1 || m % pp != 0)) continue;
          // A tiny share stands once for all its schemes (the ring's label), screened unloaded.
          const std::vector<Candidate> variants = tiny ? std::vector<Candidate>(1) : attention_variants(tp, cp, gpn);
          for (Candidate c : variants) {
            c.axis_values = own_values;
            c.tp = tp;
            c.cp = cp;
            c.pp = pp;
            c.dp = dp;
            c.vstages = v;
            c.micro_batches = m;
            c.recompute = given.training.recompute;
            c.zero_stage = given.parallel.zero_stage;
            if (tiny) {
              c.sets = structure_sets(c, res.nodes);
              c.status = "screened";
              c.why = "seq_len / cp = " + str(static_cast<int>(given.training.seq_len / cp)) +
                      " tokens per CP rank, under two " + str(kAttentionTile) + "-token attention tiles";
              finish_label(c);
              res.structures++;
              res.all.push_back(c);
              continue;
            }
            auto all_sets = sets;
            const auto ss = structure_sets(c, res.nodes);
            all_sets.insert(all_sets.end(), ss.begin(), ss.end());
            all_sets.push_back("simulation.scope=step");
            all_sets.push_back("simulation.engine=analytic");
            c.sets = ss;
            res.structures++;
            try {
              loaded.push_back(scenario::load_scenario(path, all_sets));
              structures.push_back(c);
            } catch (const scenario::InputError& e) {
              c.status = "invalid";
              c.why = e.reason().empty() ? first_line(e.what()) : e.reason();
              finish_label(c);
              res.all.push_back(c);
            }
          }
        }
      }
  }

  // Stage 2: memory for each (recompute, ZeRO); keep the minimal fitting pairs.
  std::vector<size_t> alive;
  std::vector<size_t> scenario_of;  // index into loaded for each entry of res.all (or npos)
  scenario_of.assign(res.all.size(), SIZE_MAX);
  const double budget_bytes = memory_budget(opt, given.platform.gpu.memory_bytes);
  res.memory_budget_bytes = budget_bytes;
  for (size_t si = 0; si < structures.size(); ++si) {
    std::vector<size_t> mine;
    for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full})
      for (int z = 0; z <= 3; ++z) {
        Candidate c = structures[si];
        c.recompute = rc;
        c.zero_stage = z;
        c.sets.push_back(std::string("training.recompute=") + recompute_key(rc));
        c.sets.push_back("parallel.zero_stage=" + str(z));
        scenario::Scenario s = loaded[si];
        s.training.recompute = rc;
        s.parallel.zero_stage = z;
        const auto mem = model::peak_rank_memory(s);
        c.peak_bytes = mem.peak_bytes;
        finish_label(c);
        if (mem.peak_bytes > budget_bytes) {
          c.status = "oom";
          c.why = fmt("%.1f GB", mem.peak_bytes / 1e9) + fmt(" > %.1f GB budget", budget_bytes / 1e9) +
                  fmt(" (over by %.1f GB)", (mem.peak_bytes - budget_bytes) / 1e9);
        }
        res.all.push_back(c);
        scenario_of.push_back(si);
        mine.push_back(res.all.size() - 1);
      }
    for (size_t i : mine) {
      auto& c = res.all[i];
      if (!c.status.empty()) continue;
      for (size_t j : mine) {
        const auto& d = res.all[j];
        if (j == i || (!d.status.empty() && d.status != "dominated")) continue;
        if (d.peak_bytes > budget_bytes) continue;
        const bool le = static_cast<int>(d.recompute) <= static_cast<int>(c.recompute) && d.zero_stage <= c.zero_stage;
        if (le && (d.recompute != c.recompute || d.zero_stage != c.zero_stage)) {
          c.status = "dominated";
          c.why = std::string("fits with less recomputation or sharding: rc=") + recompute_key(d.recompute) +
                  " z" + str(d.zero_stage);
          break;
        }
      }
      if (c.status.empty()) alive.push_back(i);
    }
  }

  lap(res.stage_wall_s[0]);
  if (opt.progress) opt.progress->phase("plan: " + str(static_cast<int>(alive.size())) + " of " +
                                        str(static_cast<int>(res.all.size())) + " candidates fit; attention layers");

  // Stage 3: one attention layer per (TP, CP, scheme) that has survivors.
  std::map<std::string, std::vector<size_t>> by_scheme;  // "tp cp scheme" -> candidates
  std::vector<std::string> keys;
  std::vector<scenario::Scenario> runs;
  for (size_t i : alive) {
    const auto& c = res.all[i];
    if (c.cp == 1) continue;
    const std::string key = "tp" + str(c.tp) + " cp" + str(c.cp) + " " + scheme_label(c);
    if (!by_scheme.count(key)) {
      keys.push_back(key);
      scenario::Scenario s = loaded[scenario_of[i]];
      s.simulation.scope = scenario::Scope::AttentionLayer;
      s.simulation.engine = scenario::EngineKind::Analytic;
      // One TP rank's CP group stands for all where they cannot differ: tp times fewer ops
      // (a ring layer at cp 512 is 2.9 M ops per group; the 405B screen on 4,096 GPUs spent
      // 219 s of 253 here with every group built). Only the ring family, cp^2 transfers that
      // are P2P between the group's own GPUs, which the analytic engine times alone; the
      // collectives of all-gather, Ulysses and USP relay through other ranks' NICs (PXN) and do
      // meet the other groups (measured: 8.96 vs 10.13 ms for an all-gather layer, TP 4 CP 8).
      s.simulation.one_tp_group = !s.perturb.any() && (c.scheme == AttentionScheme::Ring ||
                                                       c.scheme == AttentionScheme::DoubleRing);
      runs.push_back(s);
    }
    by_scheme[key].push_back(i);
  }
  // Largest first (ops grow as cp^2 transfers per group built, every TP group's outside the
  // ring family), so that the longest layer is not the last one left running on one core
  // (the 405B on 16,384 GPUs: USP at tp 8, cp 512 is 10.8 s of 447 layers' 125 s).
  std::vector<double> size;
  for (const scenario::Scenario& r : runs)
    size.push_back(static_cast<double>(r.parallel.cp) * r.parallel.cp * (r.simulation.one_tp_group ? 1 : r.parallel.tp));
  const std::vector<size_t> order = largest_first(size);
  std::vector<scenario::Scenario> sorted;
  for (size_t k : order) sorted.push_back(runs[k]);
  const std::vector<double> attn_sorted = run_analytic_step_times(sorted, opt.jobs);
  std::vector<double> attn(runs.size());
  for (size_t k = 0; k < order.size(); ++k) attn[order[k]] = attn_sorted[k];
  res.attention_runs = static_cast<int>(runs.size());
  lap(res.stage_wall_s[1]);
  std::map<std::string, std::vector<std::pair<double, std::string>>> per_group;  // "tp cp" -> (t, key)
  for (size_t k = 0; k < keys.size(); ++k) {
    for (size_t i : by_scheme[keys[k]]) res.all[i].attention_layer_s = attn[k];
    const auto& c = res.all[by_scheme[keys[k]].front()];
    per_group["tp" + str(c.tp) + " cp" + str(c.cp)].push_back({attn[k] > 0 ? attn[k] : 1e300, keys[k]});
  }
  for (auto& [g, v] : per_group) {
    std::sort(v.begin(), v.end());
    for (size_t r = static_cast<size_t>(std::max(1, opt.schemes_kept)); r < v.size(); ++r)
      for (size_t i : by_scheme[v[r].second]) {
        auto& c = res.all[i];
        c.status = v[r].first >= 1e300 ? "failed" : "screened";
        c.why = v[r].first >= 1e300 ? "attention layer failed to build or replay"
                                    : fmt("attention layer %.2f ms", 1e3 * v[r].first) +
                                          fmt(" vs %.2f ms for ", 1e3 * v[0].first) +
                                          v[0].second.substr(v[0].second.rfind(' ') + 1);
      }
  }

  // Stage 4: whole steps, analytic, best lower bound first. estimate_s is a lower bound on the
  // step, stretched by the pipeline bubble of a balanced 1F1B schedule: the larger of every
  // GPU's share of the FLOPs at the GPU's highest peak and its compute stream's priced work
  // (probe_layer: the kernels as the cost model prices them, recomputation included, and the
  // waits TP collectives force on them, x layers per stage x micro-batches, plus the last
  // stage's LM head: step_lower_bound). FLOPs at peak cannot tell layouts without a bubble
  // apart (the 405B on 16,384 GPUs: every pp 1 layout had the same bound, ~2x under its
  // step); priced kernels can (attention split by CP, GEMMs thinned by TP). Steps run in rounds
  // of 4 x jobs; once a candidate's bound per token is no better than the best simulated time
  // per token, it and every later one (sorted by that bound) cannot win and are not simulated.
  // (Rounds of 2 x jobs left a worker idle while the other finished the round's longest step:
  // the 405B on 16,384 GPUs, 586 s of steps in 461 s; with 4 x jobs 548 s in 364 s, the same
  // layouts simulated.)
  const double peak = std::max(given.platform.gpu.peak_flops, given.platform.gpu.fp8_peak_flops);
  // The same layer probe estimates the step's graph (one layer's ops x layers x micro-batches
  // x replicas built; within 10 % of the built graph on the bundled scenarios, which also have
  // stage-boundary, DP and optimizer ops): a layout whose estimate is over kEstimateMargin x
  // what --max-memory holds is not simulated, where its child would build tens of millions of
  // ops to find that out (the 405B on 16,384 GPUs: 48 of the best-bound layouts, ZeRO-3 and
  // USP with every replica built, cost 755 s that way). Nearer the limit the child decides.
  const double limit = opt.max_memory_bytes > 0 ? opt.max_memory_bytes : default_max_memory();
  std::map<std::string, LayerProbe> probes;  // "tp cp scheme recompute" -> its layer
  std::map<int, model::Topology> topos;      // per node count
  // "tp cp pp dp nodes" -> one DP-group all-gather's ops, as a graph of every replica, as
  // SimGrid's graph of one replica (the others' GPUs bystanders) and as the analytic step's lean
  // one build it (schedule/lean_lanes.cpp)
  struct GroupOps {
    double every = 0, symmetric = 0, lean = 0;
  };
  std::map<std::string, GroupOps> group_ops;
  std::vector<size_t> step;
  // The estimates' memory, for the children: stage 5 (SimGrid) and stage 4's lean graphs.
  std::vector<double> est_bytes(res.all.size(), 0.0), lean_bytes(res.all.size(), 0.0);
  for (size_t i : alive)
    if (res.all[i].status.empty()) {
      auto& c = res.all[i];
      double rf = 1;
      const scenario::Scenario& sc = loaded[scenario_of[i]];
      flops(sc, c, rf);
      const double bubble = c.pp > 1 ? (c.pp - 1.0) / (c.vstages * c.micro_batches) : 0.0;
      c.estimate_s = c.model_flops * rf / (opt.gpus * peak) * (1 + bubble);
      const std::string key = "tp" + str(c.tp) + " cp" + str(c.cp) + " " +
                              (c.cp > 1 ? scheme_label(c) : "-") + " " + recompute_key(c.recompute);
      auto it = probes.find(key);
      if (it == probes.end()) {
        scenario::Scenario one = sc;
        one.training.recompute = c.recompute;
        it = probes.emplace(key, probe_layer(one)).first;
      }
      const LayerProbe& lp = it->second;
      c.estimate_s = std::max(c.estimate_s, step_lower_bound(lp, sc));
      if (lp.built) {
        auto t = topos.find(sc.platform.nodes);
        if (t == topos.end()) t = topos.try_emplace(sc.platform.nodes, sc.platform, sc.perturb).first;
        // The probe is shared by DP degrees and ZeRO stages: its DP collectives are counted for
        // this layout's mesh.
        scenario::Scenario cs = sc;
        cs.training.recompute = c.recompute;
        cs.parallel.zero_stage = c.zero_stage;
        GroupOps go;
        if (c.dp * c.cp > 1 && (lp.probe_group_ops > 0 || c.zero_stage >= 3)) {
          const std::string gk = "tp" + str(c.tp) + " cp" + str(c.cp) + " pp" + str(c.pp) + " dp" + str(c.dp) +
                                 " n" + str(sc.platform.nodes);
          auto g = group_ops.find(gk);
          if (g == group_ops.end()) {
            scenario::Scenario lean = cs;
            lean.simulation.lean_collectives = true;
            auto n = [&](const scenario::Scenario& s, bool sym) {
              return static_cast<double>(schedule::dp_group_gather_ops(s, t->second, sym));
            };
            g = group_ops.emplace(gk, GroupOps{n(cs, false), n(cs, true), n(lean, true)}).first;
          }
          go = g->second;
        }
        const LayerProbe mesh = scaled_to_mesh(lp, cs, go.every);
        const bool every_replica = builds_every_replica(cs, t->second, mesh);
        const double ops =
            estimate_graph_ops(cs, every_replica ? mesh : scaled_to_mesh(lp, cs, go.symmetric), every_replica);
        // Stage 4 (analytic) and 5 (SimGrid) want the step time alone (step_time_bytes).
        const double bytes = step_time_bytes(ops);
        if (bytes > kEstimateMargin * limit) {
          c.status = "too_big";
          c.why = fmt("not simulated: its task graph would have about %.3g M ops", ops / 1e6) +
                  std::string(" (one layer's x layers x micro-batches") +
                  (every_replica ? " x every replica" : "") + ")" +
                  fmt(" and need about %.3g GB", bytes / 1e9) +
                  fmt(", over %.3g x", kEstimateMargin) + fmt(" the %.3g GB of --max-memory", limit / 1e9);
          continue;
        }
        est_bytes[i] = bytes;
        // (a lean build mirrors TP ranks whether or not it builds every replica)
        lean_bytes[i] = step_time_bytes(estimate_graph_ops(
            cs, lean_probe(scaled_to_mesh(lp, cs, every_replica ? go.every : go.lean), cs), every_replica));
      }
      step.push_back(i);
    }
  res.compute_probes = static_cast<int>(probes.size());
  if (opt.progress) opt.progress->phase("plan: whole steps (analytic), up to " + str(opt.budget) + " of " +
                                        str(static_cast<int>(step.size())));
  auto per_token = [&](size_t i) { return res.all[i].estimate_s / res.all[i].tokens_per_step; };
  std::stable_sort(step.begin(), step.end(), [&](size_t a, size_t b) {
    const double ea = per_token(a), eb = per_token(b);
    return ea != eb ? ea < eb : res.all[a].label < res.all[b].label;
  });
  std::vector<size_t> ok;
  double best = 1e300;  // best simulated step time per token
  auto stage4_scenario = [&](size_t i) {
    scenario::Scenario s = loaded[scenario_of[i]];
    s.training.recompute = res.all[i].recompute;
    s.parallel.zero_stage = res.all[i].zero_stage;
    return s;
  };
  StepWorkers workers(stage4_scenario, opt.jobs,
                      opt.max_memory_bytes > 0 ? opt.max_memory_bytes : default_plan_memory());
  const size_t round = static_cast<size_t>(4 * std::max(1, opt.jobs));
  for (size_t k = 0; k < step.size();) {
    if (static_cast<int>(k) >= opt.budget) {
      for (; k < step.size(); ++k) {
        auto& c = res.all[step[k]];
        c.status = "budget";
        c.why = "not simulated: --budget " + str(opt.budget) +
                " whole-step runs spent on layouts with a better lower bound";
      }
      break;
    }
    if (per_token(step[k]) >= best) {
      for (; k < step.size(); ++k) {
        auto& c = res.all[step[k]];
        c.status = "bounded";
        c.why = "cannot win: at most " + fmt("%.0f tokens/s", 1 / per_token(step[k])) +
                fmt(" (its kernels, TP waits and bubble) vs %.0f simulated", 1 / best);
      }
      break;
    }
    std::vector<size_t> batch;
    std::vector<double> batch_bytes;
    runs.clear();
    for (; k < step.size() && batch.size() < round && static_cast<int>(k) < opt.budget &&
           per_token(step[k]) < best;
         ++k) {
      runs.push_back(stage4_scenario(step[k]));
      batch.push_back(step[k]);
      batch_bytes.push_back(lean_bytes[step[k]]);
    }
    const std::vector<StepOutcome> st = bounded_steps(runs, opt, batch_bytes, &workers, batch);
    res.step_runs += static_cast<int>(runs.size());
    for (size_t b = 0; b < batch.size(); ++b) {
      auto& c = res.all[batch[b]];
      // As one candidate at a time would decide, whatever the round's size (it grows with -j):
      // a candidate whose bound an earlier one in this round already beat is not ranked, so
      // -j 1 and -j 8 rank the same table.
      if (per_token(batch[b]) >= best) {
        c.status = "bounded";
        c.why = "cannot win: at most " + fmt("%.0f tokens/s", 1 / per_token(batch[b])) +
                fmt(" (its kernels, TP waits and bubble) vs %.0f simulated", 1 / best);
        continue;
      }
      c.analytic_wall_s = st[b].wall_s;
      if (st[b].wall_s >= 0) c.analytic_start_s = st[b].start_s - t_start;
      if (!record(st[b], opt, c)) continue;
      c.analytic_s = st[b].step_s;
      c.status = "ranked";
      ok.push_back(batch[b]);
      best = std::min(best, c.analytic_s / c.tokens_per_step);
    }
    if (opt.progress)
      opt.progress->status(str(res.step_runs) + " steps run" +
                           (best < 1e300 ? fmt(", best %.0f tokens/s so far", 1 / best) : std::string()));
  }
  auto by_tps = [&](size_t a, size_t b) {
    const double ta = res.all[a].tokens_per_s(), tb = res.all[b].tokens_per_s();
    return ta != tb ? ta > tb : res.all[a].label < res.all[b].label;
  };
  std::stable_sort(ok.begin(), ok.end(), by_tps);
  if (!axes.empty() && !ok.empty()) {
    if (opt.progress) opt.progress->phase("plan: " + [&] {
      std::string n;
      for (const auto& a : res.axes) n += (n.empty() ? "" : ", ") + a;
      return n;
    }() + " on the best " + str(static_cast<int>(std::min<size_t>(kAxisLayouts, ok.size()))) + " layouts");
    search_axes(path, sets, opt, axes, kAxisLayouts, res, ok);
    // A variant's graph is its layout's (the same ops, priced otherwise).
    est_bytes.resize(res.all.size(), 0.0);
    for (size_t i = 0; i < res.all.size(); ++i)
      if (res.all[i].variant_of < i) est_bytes[i] = est_bytes[res.all[i].variant_of];
  }

  lap(res.stage_wall_s[2]);

  // Stage 5: SimGrid for the best few whose graph it can hold (verifiable).
  const std::vector<size_t> verified = verifiable(ok, est_bytes, limit, opt.verify, res.all);  // into ok
  runs.clear();
  for (size_t k : verified) {
    const Candidate& c = res.all[ok[k]];
    scenario::Scenario s;
    if (c.variant_of != SIZE_MAX) {  // an axis variant: its own overrides (plan_axes.hpp)
      auto all = sets;
      all.insert(all.end(), c.sets.begin(), c.sets.end());
      all.push_back("simulation.scope=step");
      s = scenario::load_scenario(path, all);
    } else {
      s = loaded[scenario_of[ok[k]]];
      s.training.recompute = c.recompute;
      s.parallel.zero_stage = c.zero_stage;
    }
    s.simulation.engine = scenario::EngineKind::SimGrid;
    runs.push_back(s);
  }
  // Stage 4's estimates: the same graph, and a SimGrid step time alone needs no more per op
  // (run_bounded_steps). Without them each child probed its own graph at the full-replay
  // footprint, and the largest (405B, tp 2 cp 16 pp 8) found itself over its equal share and ran
  // again alone after the others: 61 s for three children of 16, 17 and 44 s.
  std::vector<double> verify_est;
  for (size_t k : verified) verify_est.push_back(est_bytes[ok[k]]);
  if (opt.progress) opt.progress->phase("plan: SimGrid on the best " + str(static_cast<int>(runs.size())));
  const std::vector<StepOutcome> sg = bounded_steps(runs, opt, verify_est);
  res.simgrid_runs = static_cast<int>(runs.size());
  lap(res.stage_wall_s[3]);
  // A layout SimGrid cannot hold or finish keeps its analytic time, and says why.
  for (size_t v = 0; v < verified.size(); ++v) {
    auto& c = res.all[ok[verified[v]]];
    c.simgrid_wall_s = sg[v].wall_s;
    if (sg[v].wall_s >= 0) c.simgrid_start_s = sg[v].start_s - t_start;
    if (sg[v].step_s > 0) c.simgrid_s = sg[v].step_s;
    else if (sg[v].over_memory)
      c.why = "SimGrid not run: " +
              (sg[v].error.empty() ? fmt("its graph would need about %.3g GB", sg[v].estimate_bytes / 1e9)
                                   : "stopped: " + first_line(sg[v].error)) +
              " (--max-memory)";
  }
  // The verified first, by their SimGrid times; then the others in analytic order.
  const auto first_unverified = std::stable_partition(ok.begin(), ok.end(), [&](size_t i) { return res.all[i].simgrid_s > 0; });
  std::stable_sort(ok.begin(), first_unverified, by_tps);
  res.ranked = ok;
  if (!ok.empty()) {
    const double best = res.all[ok.front()].tokens_per_s();
    for (size_t k = 1; k < ok.size(); ++k) {
      auto& c = res.all[ok[k]];
      // The verified lead the table: an unverified layout's analytic figure may beat the best's
      // SimGrid one (the 405B with --budget 4 --verify 1: 1,573,025 analytic vs 1,568,485).
      const std::string unverified = c.why.rfind("SimGrid not run", 0) == 0 ? "; " + c.why : "";
      if (c.tokens_per_s() > best) {
        c.why = fmt("not verified with SimGrid: %.0f tokens/s analytic", c.tokens_per_s()) +
                fmt(" vs %.0f for the best, verified", best) + (unverified.empty() ? " (--verify)" : unverified);
        continue;
      }
      c.why = fmt("slower: %.0f tokens/s", c.tokens_per_s()) + fmt(" vs %.0f", best) +
              (c.simgrid_s > 0 ? " (SimGrid)" : " (analytic)") + unverified;
    }
  }
  return res;
}

}  // namespace cpsim::app::plan
