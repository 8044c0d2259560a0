#pragma once
/// Data-parallel replica symmetry: when one simulated replica may stand for the others (they
/// differ in nothing but the DP collectives), and which replicas perturbations touch.
#include <string>
#include <vector>

#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// replica_symmetry's answer when only the replica's own traffic can tell.
extern const char* const kCheckSpines;

/// Empty when one data-parallel replica may stand for the unperturbed ones; otherwise why not
/// (or kCheckSpines: decide with uses_spines once the first replica is built).
std::string replica_symmetry(const scenario::Scenario& sc, const model::Topology& topo,
                             const Mesh& mesh);

/// Per data-parallel replica: whether a slow GPU or node, or a degraded link, touches it.
std::vector<char> perturbed_replicas(const scenario::Scenario& sc, const model::Topology& topo,
                                     const Mesh& mesh);

/// True if any transfer from op `first` on, other than a DP collective's (scheme "dp"), crosses
/// a spine (leaf <-> spine) link.
bool uses_spines(const TaskGraph& g, const model::Topology& topo, OpId first);

}  // namespace cpsim::schedule
