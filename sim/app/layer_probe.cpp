#include "app/layer_probe.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/replay.hpp"
#include "model/activation_checkpoint.hpp"
#include "model/cost_model.hpp"
#include "schedule/plan.hpp"
#include "schedule/replicas.hpp"
#include "schedule/stage_builder.hpp"
#include "schedule/step.hpp"

namespace cpsim::app {

namespace {

/// A forward or backward kernel on a GPU's compute stream (what the bound adds up).
bool computes(const schedule::Op& op) {
  return op.kind == schedule::OpKind::Compute && op.stream == schedule::stream::kCompute &&
         (op.label.phase == schedule::Phase::Forward || op.label.phase == schedule::Phase::Backward);
}

/// Per rank, the compute stream's idle gaps that TP collectives force (LayerProbe::tp_wait_s):
/// for each forward or backward compute op fed by a TP collective, the time from the end of the
/// op before it on its stream to the collective's end (or the op's start, if sooner), in the
/// probe replayed alone on the analytic engine. None with TP communication overlap
/// (`overlapped`), where chunked GEMMs run during the collective.
struct TpWaits {
  std::vector<double> layer, head;  ///< per rank: in the transformer layers; at the LM head
};
TpWaits tp_waits(const schedule::TaskGraph& g, const model::Topology& topo, bool overlapped) {
  TpWaits w;
  w.layer.assign(static_cast<size_t>(std::max(0, g.num_ranks())), 0.0);
  w.head = w.layer;
  const uint32_t tp = g.interned("tp"), sp = g.interned("tp-sp");
  if (overlapped || (tp == UINT32_MAX && sp == UINT32_MAX)) return w;
  const schedule::Trace tr = engine::replay(g, topo, scenario::EngineKind::Analytic, {});
  // Each compute op after the first on its rank's compute stream, in stream order.
  for (schedule::OpId b = 0; b < g.size(); ++b) {
    const schedule::Op op = g.op(b);
    if (op.unordered || op.stream != schedule::stream::kCompute || !computes(op)) continue;
    const schedule::OpId before = g.queue_prev(b, 0);
    if (before == schedule::kNoOp) continue;
    double fed = -1;
    g.for_each_pred(b, [&](schedule::OpId p) {
      const uint32_t scheme = g.op(p).label.scheme;
      if (scheme == tp || scheme == sp) fed = std::max(fed, tr.end_s[p]);
    });
    const double prev_end = tr.end_s[before];
    if (fed > prev_end)
      (op.label.layer < 0 ? w.head : w.layer)[static_cast<size_t>(op.rank)] += std::min(fed, tr.start_s[b]) - prev_end;
  }
  return w;
}

/// The probe `one` (a layer-scope build of sc's first layers) measured, scaled to sc's mesh.
LayerProbe measure(const scenario::Scenario& sc, const scenario::Scenario& one) {
  LayerProbe r;
  try {
    const model::Topology topo(one.platform, one.perturb);
    const auto cost = model::CostModel::make(one.cost, one.platform.gpu);
    const auto built = schedule::plan(one, topo, *cost);
    const schedule::TaskGraph& g = built.graph;
    std::vector<double> busy(static_cast<size_t>(std::max(0, g.num_ranks())), 0.0), head = busy;
    std::vector<char> seen;
    double ops = 0, dp_ops = 0;
    const uint32_t dp = g.interned("dp"), embedding = g.interned("embedding");
    for (const schedule::Op& op : g.ops()) {
      if (op.label.layer < 0) {
        // The LM head and loss run on the last stage; the embedding (first stage) is left out.
        if (computes(op) && op.label.name != embedding) head[static_cast<size_t>(op.rank)] += op.duration_s;
        continue;
      }
      ++ops;
      if (op.label.scheme == dp) ++dp_ops;
      if (static_cast<size_t>(op.label.layer) >= seen.size()) seen.resize(op.label.layer + 1, 0);
      seen[static_cast<size_t>(op.label.layer)] = 1;
      if (computes(op)) busy[static_cast<size_t>(op.rank)] += op.duration_s;
    }
    const auto layers = static_cast<double>(std::count(seen.begin(), seen.end(), 1));
    if (layers == 0) return r;
    r.built = true;
    r.ops = (ops - dp_ops) / layers;
    r.dp_step_ops = dp_ops / layers;
    if (dp_ops > 0) r.probe_group_ops = static_cast<double>(schedule::dp_group_gather_ops(one, topo));
    const bool mesh_group = sc.parallel.dp * sc.parallel.cp > 1 && (dp_ops > 0 || sc.parallel.zero_stage >= 3);
    r = scaled_to_mesh(r, sc, mesh_group ? static_cast<double>(schedule::dp_group_gather_ops(sc, topo)) : 0);
    r.uses_spines = schedule::uses_spines(g, topo, 0);
    r.mirrored_ops = r.ops;
    scenario::Scenario lean = one;
    lean.simulation.lean_collectives = true;
    if (schedule::tp_mirror(lean, topo).empty()) {
      const auto mirrored = schedule::plan(lean, topo, *cost);
      double n = 0;
      for (const schedule::Op& op : mirrored.graph.ops()) n += op.label.layer >= 0 && op.label.scheme != dp;
      r.mirrored_ops = n / layers;
      r.tp_mirrored = true;
    }
    if (!sc.perturb.any() && sc.model.moe.experts == 0 && sc.training.doc_distribution.empty()) {
      const TpWaits w = tp_waits(g, topo, one.parallel.tp_comm_overlap);
      size_t worst = 0;
      for (size_t i = 0; i < busy.size(); ++i)
        if (busy[i] + w.layer[i] > busy[worst] + w.layer[worst]) worst = i;
      r.compute_s = (busy[worst] + w.layer[worst]) / layers;
      r.tp_wait_s = w.layer[worst] / layers;
      // The same GPU's head (the last stage's GPU of that CP and TP index): the sum of two
      // maxima over different GPUs could be more than any one GPU does.
      r.head_s = head[worst] + w.head[worst];
    }
  } catch (const std::exception&) {
    return LayerProbe{};
  }
  return r;
}

}  // namespace

LayerProbe probe_layer(const scenario::Scenario& sc) {
  scenario::Scenario one = sc;
  one.parallel.pp = 1;
  one.parallel.virtual_stages = 1;
  one.parallel.dp = 1;
  one.parallel.dp_replicate = 1;
  one.training.micro_batches = 1;
  one.parallel.zero_stage = std::min(sc.parallel.zero_stage, 2);
  one.simulation.scope = scenario::Scope::Layer;
  // Collectives as the whole mesh builds them (pipelined above 512 GPUs, schedule/step.cpp): a
  // 128-GPU probe of a 16,384-GPU mesh would otherwise build its TP all-reduces step by step,
  // 14 x the transfers, and its op count would be no floor.
  one.simulation.collectives = schedule::pipelined_collectives(sc) ? scenario::CollectiveModel::Pipelined
                                                                   : scenario::CollectiveModel::Steps;
  // The probe builds the pattern's first layers as one model chunk, where partial
  // recomputation (Megatron's block method, torchtitan's layer policy) would recompute its own
  // choice of them; the model recomputes a fraction f of its layers (per chunk of the stages).
  // The probe's layers are then built once all recomputed and once none, weighed by f.
  const auto& tr = sc.training;
  const bool partial =
      (tr.recompute == scenario::Recompute::Full && tr.recompute_method == scenario::TrainingSpec::RecomputeMethod::Block) ||
      (tr.recompute == scenario::Recompute::Selective && tr.selective_ac == scenario::TrainingSpec::SelectiveAc::Layer);
  if (!partial) return measure(sc, one);
  scenario::Scenario all = one, none = one;
  all.training.recompute = scenario::Recompute::Full;
  all.training.recompute_method = scenario::TrainingSpec::RecomputeMethod::Uniform;
  all.training.recompute_layers = 1;
  none.training.recompute = scenario::Recompute::None;
  const double f = model::recomputed_fraction(sc);
  if (f >= 1) return measure(sc, all);
  if (f <= 0) return measure(sc, none);
  const LayerProbe a = measure(sc, all), b = measure(sc, none);
  if (!a.built || !b.built) return LayerProbe{};
  LayerProbe r = b;
  auto mix = [f](double x, double y) { return f * x + (1 - f) * y; };
  if (a.compute_s > 0 && b.compute_s > 0) {
    r.compute_s = mix(a.compute_s, b.compute_s);
    r.tp_wait_s = mix(a.tp_wait_s, b.tp_wait_s);
  }
  r.ops = mix(a.ops, b.ops);
  r.mirrored_ops = mix(a.mirrored_ops, b.mirrored_ops);
  return r;
}

LayerProbe scaled_to_mesh(LayerProbe lp, const scenario::Scenario& sc, double group_ops) {
  const auto& p = sc.parallel;
  lp.shared_step_ops = lp.probe_group_ops > 0 ? lp.dp_step_ops * group_ops / lp.probe_group_ops : lp.dp_step_ops;
  // ZeRO-3 gathers each layer's weights per micro-batch, TP index and pass (forward, backward;
  // a recomputed forward runs on the backward's gather): one DP-group all-gather each
  // (stage_builder.cpp).
  lp.shared_ops = p.zero_stage >= 3 && p.dp * p.cp > 1 && sc.mode != scenario::Mode::Prefill
                      ? 2.0 * p.tp * group_ops
                      : 0;
  return lp;
}

double step_lower_bound(const LayerProbe& lp, const scenario::Scenario& sc) {
  if (!(lp.compute_s > 0)) return -1;
  const auto& p = sc.parallel;
  const int m = sc.training.micro_batches;
  const double bubble = p.pp > 1 ? (p.pp - 1.0) / (std::max(1, p.virtual_stages) * m) : 0.0;
  return lp.compute_s * sc.model.layers / p.pp * m * (1 + bubble) + lp.head_s * m;
}

LayerProbe lean_probe(LayerProbe lp, const scenario::Scenario& sc) {
  if (!lp.tp_mirrored) return lp;
  lp.ops = lp.mirrored_ops;
  lp.shared_ops /= sc.parallel.tp;
  lp.shared_step_ops /= sc.parallel.tp;
  return lp;
}

bool builds_every_replica(const scenario::Scenario& sc, const model::Topology& topo, const LayerProbe& lp) {
  const std::string sym = schedule::replica_symmetry(sc, topo, schedule::Mesh(sc.parallel));
  return !sym.empty() && !(sym == schedule::kCheckSpines && !lp.uses_spines);
}

double estimate_graph_ops(const scenario::Scenario& sc, const LayerProbe& lp, bool every_replica) {
  const double layers = sc.model.layers;
  return (lp.ops * (every_replica ? sc.parallel.dp : 1) + lp.shared_ops) * layers * sc.training.micro_batches +
         lp.shared_step_ops * layers;
}

}  // namespace cpsim::app
