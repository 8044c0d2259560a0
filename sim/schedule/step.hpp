#pragma once
/// Step composition on the [TP, CP, PP, DP] mesh (mesh.hpp): each layer as real ops (norms,
/// projections, MLP, attention per its scheme, TP communication with or without sequence
/// parallelism), forward and backward over micro-batches with recomputation, 1F1B pipelining
/// and DP gradient reduction in buckets overlapped with the backward.
#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "scenario/specs.hpp"
#include "schedule/attention.hpp"
#include "schedule/mesh.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

/// What a build produced besides the graph.
struct BuildInfo {
  std::string scope;
  int ranks = 0;                  ///< GPUs that carry ops
  std::vector<int> cp_group;      ///< the first CP group (for per-layer reports)
  double model_flops = 0;         ///< model FLOPs of what was built (no recomputation)
  double tokens = 0;              ///< tokens processed by what was built (global batch)
  int full_layers_built = 0;      ///< full-attention layer passes in the graph
  /// Whether one data-parallel replica stood for all, or why not ("" = not applicable).
  std::string symmetry;
  /// Data-parallel replicas added as copies of the first built one's ops, and why none were
  /// when there was more than one to build ("" = copied or nothing to copy).
  int replicas_copied = 0;
  std::string why_not_copied;
};

/// Whether the scenario's ring collectives are built as one pipelined transfer per rank
/// (simulation.collectives, auto: above 512 GPUs in the mesh) or as their algorithm's steps.
bool pipelined_collectives(const scenario::Scenario& sc);

/// A lean build (SimulationSpec::lean_collectives) found, once its first replica existed, that
/// every replica must be built after all: the collectives built so far left out transfers of
/// replicas that are now built. schedule::plan builds the graph again, not lean.
class LeanRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Builds the scenario's scope (attention-layer, layer or step) into `g` (not finalized), with
/// the fleet noise `sc` asks for as g.noise(). Lean (sc.simulation.lean_collectives) where one
/// replica stands for others: their GPUs are TaskGraph phantom ranks. Throws LeanRefused.
BuildInfo build_scenario(const scenario::Scenario& sc, const model::Topology& topo,
                         Pricer& pricer, TaskGraph& g);

/// Scope attention-layer (attention_layer.cpp): the first full-attention layer's forward and
/// backward on each TP rank's CP group.
BuildInfo build_attention_layer(const scenario::Scenario& sc, const model::Topology& topo,
                                Pricer& pricer, TaskGraph& g, const Mesh& mesh, const Documents& docs);

/// Documents of the scenario's sequence (explicit lengths, a seeded draw, or one document).
Documents scenario_documents(const scenario::Scenario& sc);

}  // namespace cpsim::schedule
