#include "schedule/replicas.hpp"

#include <algorithm>

#include "log/log.hpp"

namespace cpsim::schedule {

const char* const kCheckSpines = "check spines";

/// Empty when one data-parallel replica may stand for the unperturbed ones (identical inputs,
/// no shared links); otherwise why not. Replicas differ in nothing but the DP collectives when
/// each replica's GPUs fill whole rail leaf groups (or one NVLink domain), so that their CP /
/// TP / PP traffic never meets, and nothing perturbs every GPU (jitter, static variation) or the
/// routes (rails down). Perturbations of single GPUs, nodes or links leave the other replicas
/// alike: the replicas they touch are simulated in full (perturbed_replicas).
std::string replica_symmetry(const scenario::Scenario& sc, const model::Topology& topo,
                             const Mesh& mesh) {
  const auto& p = sc.parallel;
  const auto& pert = sc.perturb;
  if (p.dp == 1) return "not needed: one data-parallel replica";
  if (sc.simulation.symmetry == scenario::Symmetry::Off) return "off (simulation.symmetry)";
  if (pert.jitter_cv > 0 || pert.gpu_variation_cv > 0 || !pert.rails_down.empty())
    return "refused: perturbations make replicas differ (jitter, static variation or rails down "
           "touch every replica)";
  if (p.order.back() != "dp") return "refused: dp is not the outermost mesh dimension";
  const auto& spec = topo.spec();
  const int64_t replica_gpus = static_cast<int64_t>(mesh.size()) / p.dp;
  const int64_t leaf_gpus = static_cast<int64_t>(spec.gpus_per_node) * spec.nodes_per_leaf;
  const bool in_domain = replica_gpus <= spec.nvlink_domain_gpus &&
                         spec.nvlink_domain_gpus % replica_gpus == 0;
  // A replica inside one NVLink domain keeps its traffic there; one that fills whole rail leaf
  // groups keeps its cross-leaf traffic on its own leaves' uplinks. Otherwise replicas meet on
  // leaf uplinks (cross-rail hops go through the spines).
  if (spec.nodes > 1 && !in_domain && replica_gpus % leaf_gpus != 0)
    return kCheckSpines;
  return "";
}

/// Per data-parallel replica: whether a slow GPU or node, or a degraded link, touches it.
std::vector<char> perturbed_replicas(const scenario::Scenario& sc, const model::Topology& topo,
                                     const Mesh& mesh) {
  const int dp = sc.parallel.dp, gpn = topo.spec().gpus_per_node;
  std::vector<char> touched(dp, 0);
  auto mark = [&](int gpu) {
    if (gpu >= 0 && gpu < mesh.size()) touched[mesh.coord_of(gpu)[Mesh::kDp]] = 1;
  };
  for (const auto& [gpu, factor] : sc.perturb.gpu_factors(gpn))
    if (factor != 1 && gpu != sc.perturb.neutral_rank) mark(gpu);
  for (const auto& l : sc.perturb.links) {
    if (l.bw_factor == 1 && l.add_latency_s == 0) continue;
    if (l.link == scenario::PerturbLink::Nic)  // a NIC may serve several GPUs of its node
      for (int gpu = l.gpu / gpn * gpn; gpu < (l.gpu / gpn + 1) * gpn; ++gpu) mark(gpu);
    else
      mark(l.gpu);
  }
  return touched;
}

std::string tp_mirror(const scenario::Scenario& sc, const model::Topology& topo) {
  const auto& p = sc.parallel;
  const auto& spec = topo.spec();
  if (!sc.simulation.lean_collectives || !sc.simulation.mirror_tp) return "not a lean build";
  if (p.tp == 1) return "no tensor parallelism";
  if (sc.perturb.any()) return "perturbations";
  if (sc.model.moe.experts > 0 || p.ep > 1) return "MoE (its all-to-alls and expert shards span TP indices)";
  if (p.sequence_parallel && p.tp_comm_overlap) return "TP communication overlap";
  if (p.order.empty() || p.order.front() != "tp") return "tp is not the innermost mesh dimension";
  if (spec.intra != scenario::IntraFabric::NVSwitch) return "not an NVSwitch node";
  if (spec.gpus_per_node % p.tp != 0) return "a TP group spans nodes";
  if (spec.nodes > 1 && spec.nics_per_node != spec.gpus_per_node) return "GPUs share NICs";
  return "";
}

/// True if any transfer from op `first` on, other than a DP collective's, crosses a spine
/// (leaf <-> spine) link: the only links that GPUs of different replicas can share besides
/// those of the DP collectives. The DP collectives are left out: every replica's members take
/// part in them in the symmetric build too. Among the first replica's ops they are ZeRO-3's
/// per-layer parameter gathers and the gradient buckets reduced during the backward (scheme
/// "dp"); counting them refused symmetry to every ZeRO-3 layout whose replica does not fill
/// whole leaf groups (the 405B on 16,384 GPUs, tp 8 cp 1 pp 2 dp 1,024: all 1,024 replicas
/// built, ~486 M ops, where the plan's estimate had one replica, ~50 M).
bool uses_spines(const TaskGraph& g, const model::Topology& topo, OpId first) {
  const uint32_t dp = g.interned("dp");
  for (OpId id = first; id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (op.kind != OpKind::Transfer || op.label.scheme == dp) continue;
    for (uint32_t l : topo.route(op.rank, op.peer))
      if (topo.links()[l].cls == model::LinkClass::Spine) return true;
  }
  return false;
}

bool uses_nics(const TaskGraph& g, const model::Topology& topo, OpId first, OpId last) {
  const uint32_t dp = g.interned("dp");
  for (OpId id = first; id < last && id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (op.kind != OpKind::Transfer || op.label.scheme == dp) continue;
    for (uint32_t l : topo.route(op.rank, op.peer))
      if (topo.links()[l].cls == model::LinkClass::Nic) return true;
  }
  return false;
}

void say_if_approximate(const TaskGraph& g, const model::Topology& topo, const ReplicaPlan& r, OpId first) {
  if (!r.symmetric || std::count(r.built.begin(), r.built.end(), 0) == 0 || !log::enabled(log::Level::Info)) return;
  if (!uses_nics(g, topo, first, static_cast<OpId>(g.size()))) return;
  log::info("shortcut: replica symmetry is approximate here: the replica's own traffic shares NICs with its DP "
            "collectives, which the mirrored replicas' DP flows do not meet (SimGrid: +0.92 % measured for CP 16 "
            "over two nodes; the analytic engine is exact; --set simulation.symmetry=off replays every replica)");
}

std::vector<uint8_t> bystanders(const Mesh& mesh, const std::vector<char>& built) {
  std::vector<uint8_t> by(static_cast<size_t>(mesh.size()), 0);
  for (int r = 0; r < mesh.size(); ++r)
    by[static_cast<size_t>(r)] = !built[static_cast<size_t>(mesh.coord_of(r)[Mesh::kDp])];
  return by;
}

ReplicaPlan plan_replicas(const scenario::Scenario& sc, const model::Topology& topo, const Mesh& mesh) {
  const int dp = sc.parallel.dp;
  ReplicaPlan r;
  r.why_not = replica_symmetry(sc, topo, mesh);
  r.symmetric = r.why_not.empty() || r.why_not == kCheckSpines;
  r.perturbed = r.symmetric ? perturbed_replicas(sc, topo, mesh) : std::vector<char>(dp, 1);
  while (r.symmetric && r.rep < dp && r.perturbed[r.rep]) ++r.rep;
  if (r.symmetric && r.rep == dp) {
    r.symmetric = false;
    r.why_not = "refused: perturbations touch every replica";
  }
  r.built.assign(dp, 1);
  if (r.symmetric)
    for (int d = 0; d < dp; ++d) r.built[d] = d == r.rep || r.perturbed[d];
  r.spines_checked = r.why_not != kCheckSpines;
  return r;
}

void check_spines(TaskGraph& g, const model::Topology& topo, ReplicaPlan& r) {
  if (r.spines_checked) return;
  r.spines_checked = true;
  r.symmetric = !uses_spines(g, topo, 0);
  r.why_not = r.symmetric ? "" : "refused: the replica's traffic crosses spine links other replicas share";
  if (r.symmetric) return;
  std::fill(r.built.begin(), r.built.end(), 1);
  g.clear_bystanders();
}

std::string describe_symmetry(const ReplicaPlan& r, int dp) {
  const int n_built = static_cast<int>(std::count(r.built.begin(), r.built.end(), 1));
  std::string touched;
  for (int d = 0; d < dp; ++d)
    if (r.symmetric && r.perturbed[d]) touched += (touched.empty() ? "" : ", ") + std::to_string(d);
  if (!r.symmetric) return r.why_not;
  if (touched.empty())
    return "used: one data-parallel replica simulated; the other " + std::to_string(dp - 1) +
           " take part only in the DP collectives";
  return "used: " + std::to_string(n_built) + " data-parallel replicas simulated (perturbed: " +
         touched + "; replica " + std::to_string(r.rep) + " stands for the other " +
         std::to_string(dp - n_built) + ", which take part only in the DP collectives)";
}

}  // namespace cpsim::schedule
