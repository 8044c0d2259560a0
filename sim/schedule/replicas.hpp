#pragma once
/// Data-parallel replica symmetry: when one simulated replica may stand for the others (they
/// differ in nothing but the DP collectives), which replicas perturbations touch, and so which
/// replicas a step builds (ReplicaPlan) and which GPUs only join their collectives.
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

/// Empty when a lean build (SimulationSpec::lean_collectives) may build each TP group's first
/// rank alone, the others phantom GPUs that only take part in the TP collectives (their twin's
/// dependencies, their own TP streams); otherwise why not. The TP ranks of a group run the same
/// ops on the same shapes at the same times when nothing perturbs one of them, no op spans TP
/// indices but the TP collectives (no MoE, no chunked TP overlap), and every route of TP index t
/// is rank 0's moved t GPUs over within the node: TP is the innermost mesh dimension, a node
/// holds whole TP groups behind one NVSwitch, and each GPU has its own NIC (its rail). Then the
/// analytic engine times each of them as rank 0, and ranks 1..tp-1 need not be built.
std::string tp_mirror(const scenario::Scenario& sc, const model::Topology& topo);

/// True if any transfer from op `first` on, other than a DP collective's (scheme "dp"), crosses
/// a spine (leaf <-> spine) link.
bool uses_spines(const TaskGraph& g, const model::Topology& topo, OpId first);

/// True if any transfer from op `first` on, other than a DP collective's, crosses a NIC: the
/// replica's own traffic then shares NICs with its DP collectives, which a mirrored replica's
/// DP flows do not meet, so replica symmetry is close to the full replay, not exact.
bool uses_nics(const TaskGraph& g, const model::Topology& topo, OpId first, OpId last);

/// At -v, once the first replica is built from op `first`: says when replica symmetry is used
/// but approximate (uses_nics), by how much it was measured, and how to replay every replica.
struct ReplicaPlan;
void say_if_approximate(const TaskGraph& g, const model::Topology& topo, const ReplicaPlan& r, OpId first);

/// Which data-parallel replicas are built: all, or the representative `rep` (the first
/// unperturbed replica) and the perturbed ones; the others take part only in the DP
/// collectives, gated by their twin in `rep`.
struct ReplicaPlan {
  std::string why_not;
  bool symmetric = false;
  bool spines_checked = true;
  /// Only TP index 0 of each TP group is built (tp_mirror): the others are its phantoms.
  bool tp_mirrored = false;
  std::vector<char> perturbed, built;
  int rep = 0;
  /// The replica whose ops stand for replica d.
  int source(int d) const { return built[d] ? d : rep; }
};

ReplicaPlan plan_replicas(const scenario::Scenario& sc, const model::Topology& topo, const Mesh& mesh);
/// Once the first replica exists: whether its traffic crosses spines other replicas share
/// (if so every replica is built from then on, and `g` has no bystanders).
void check_spines(TaskGraph& g, const model::Topology& topo, ReplicaPlan& r);
/// BuildInfo::symmetry: what was built and why.
std::string describe_symmetry(const ReplicaPlan& r, int dp);

/// The GPUs of the DP replicas not built (`built[d]` == 0), for TaskGraph::set_bystanders.
std::vector<uint8_t> bystanders(const Mesh& mesh, const std::vector<char>& built);

}  // namespace cpsim::schedule
