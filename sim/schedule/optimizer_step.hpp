#pragma once
/// The optimizer step of a data-parallel group's members once their gradients are reduced:
/// fused Adam on the GPU, and under optimizer CPU offload the host's share (model/offload.hpp)
/// copied out, stepped on the CPU and copied back. step.cpp calls it per stage and TP index.
#include <map>
#include <vector>

#include "scenario/specs.hpp"
#include "schedule/attention.hpp"
#include "schedule/replicas.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// Adds the optimizer step of each of `members` (d-major, then CP index) on `shard` parameters,
/// after reduced[i] (and after (*also)[members[i]] where `also` names one: the member's expert
/// gradients, reduced over another group), `tensors` parameter tensors (or shards of them) per
/// member, whose host ops (model/host_ops.hpp optimizer_host_ops) the step waits for; returns, per member, the op after which its updated weights are whole (a
/// lean build's phantom member takes its twin's in replica rp.rep).
std::vector<OpId> add_optimizer_steps(const scenario::Scenario& sc, Pricer& pricer, TaskGraph& g,
                                      const std::vector<int>& members, const std::vector<OpId>& reduced,
                                      double shard, double tensors, const ReplicaPlan& rp,
                                      const std::map<int, OpId>* also = nullptr);

}  // namespace cpsim::schedule
