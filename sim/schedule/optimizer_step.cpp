#include "schedule/optimizer_step.hpp"

#include <utility>

#include "model/host_ops.hpp"
#include "model/offload.hpp"
#include "schedule/host_lane.hpp"

namespace cpsim::schedule {

// Under optimizer CPU offload the offloaded share steps on the host (model/offload.hpp) on the
// copy stream after the GPU's step of the rest; the updated weights are whole once it ends.
std::vector<OpId> add_optimizer_steps(const scenario::Scenario& sc, Pricer& pricer, TaskGraph& g,
                                      const std::vector<int>& members, const std::vector<OpId>& reduced,
                                      double shard, double tensors, const ReplicaPlan& rp,
                                      const std::map<int, OpId>* also) {
  const int cp = sc.parallel.cp;
  const double host = sc.parallel.zero_stage >= 3 ? 0.0 : sc.training.optimizer_offload_fraction;
  // Fused Adam (multi-tensor apply) streams 30 B per parameter once (fp32 master, m, v read and
  // written, bf16 grad read, bf16 weight written): a streaming copy-class kernel.
  const model::Cost c = pricer.cost().memory_bound(shard * (1 - host) * 30.0, model::MemClass::Copy, "fused_adam");
  const model::OptimizerOffloadTime ht = model::optimizer_offload_time(sc, shard * host);
  // The step's Python and its kernels' launches (multi_tensor_apply chunks) on the host lane,
  // issued once the backward's ops are: the GPU's step waits for them. A platform naming
  // ops_per_attention adds no host ops outside attention.
  const double host_s = sc.platform.runtime.ops_per_attention >= 0
                            ? 0.0
                            : model::host_seconds(model::optimizer_host_ops(sc.training.stack, tensors,
                                                                            shard * (1 - host)),
                                                  sc.platform.runtime);
  std::vector<OpId> opt(members.size());
  auto optimizer_label = [&](const char* name, const char* cat) {
    OpLabel l;
    l.name = g.intern(name);
    l.category = g.intern(cat);
    l.phase = Phase::Optimizer;
    return l;
  };
  // A mirrored member (a bystander) steps when its own part of the reduction ends: members of
  // one ring finish at different times, and stepping with its twin came out 3.7 % fast on
  // SimGrid (small_dp_job, a slow GPU and a halved NVLink). A lean build's phantoms (lockstep
  // lanes) take their twin's. Priced per built member: the kernel-cost counts are the built ops'.
  double step_s = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const bool built = rp.built[i / cp];
    if (!built && g.has_phantoms()) continue;  // mirrored below
    if (built || step_s < 0) step_s = pricer.time(c, "memory");
    opt[i] = g.add_priced(members[i], stream::kCompute, step_s, optimizer_label("optimizer_step", "memory"));
    g.add_edge(reduced[i], opt[i]);
    add_region_host(g, members[i], host_s, optimizer_label("host_ops_optimizer", "overhead"), opt[i]);
    if (also)
      if (const auto it = also->find(members[i]); it != also->end()) g.add_edge(it->second, opt[i]);
    if (host <= 0) continue;
    // The copies start once the GPU's step is issued: it follows the backward on the compute
    // stream even where no gradient reduction precedes it (DP x CP = 1). Megatron issues the
    // gradients' copy just before the GPU's step; that step is short beside the host's share.
    OpId prev = opt[i];
    for (const auto& [name, t] : {std::pair<const char*, double>{"optimizer_offload_d2h", ht.d2h_s},
                                  {"optimizer_step_cpu", ht.cpu_step_s},
                                  {"optimizer_offload_h2d", ht.h2d_s}}) {
      const OpId op = g.add_compute(members[i], stream::kOffload, t, optimizer_label(name, "offload"));
      g.add_edge(prev, op);
      prev = op;
    }
    opt[i] = prev;  // (the last copy back ends the whole step)
  }
  // A lean build's phantom member waits as its twin in the representative replica does.
  for (size_t i = 0; i < members.size(); ++i)
    if (!rp.built[i / cp] && g.has_phantoms()) opt[i] = opt[static_cast<size_t>(rp.rep * cp) + i % cp];
  return opt;
}

}  // namespace cpsim::schedule
