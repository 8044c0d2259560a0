#pragma once
/// `cpsim plan`'s look at a layout before simulating it: one transformer layer built (not
/// replayed), its compute stream's priced work (a lower bound on the step) and its op count
/// (an estimate of the step's task graph, to skip layouts whose graph would not fit).
#include "model/topology.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

/// One transformer layer of `sc` built, not replayed: one pipeline stage, one replica, one
/// micro-batch and one period of its layer pattern (tp x cp GPUs, placed as the first stage of
/// the first replica when the mesh order is the default).
struct LayerProbe {
  /// The most time one GPU's compute stream spends per layer and micro-batch, forward and
  /// backward (recomputation included), as the cost model prices it. A lower bound on that
  /// work in any step of the same layer geometry, since a GPU's kernels run one after another
  /// on its compute stream. -1 when layers or micro-batches differ by draw (MoE routing, drawn
  /// documents) or by GPU (perturbations), where one sample bounds nothing.
  double compute_s = -1;
  /// Ops per layer and micro-batch of one replica (all its GPUs), its DP collectives aside: a
  /// step's graph has at least layers x micro-batches x this many per replica it builds.
  double ops = 0;
  /// DP collectives (scheme "dp"), which span DP x CP and are built once for the whole mesh
  /// however many replicas are built; the probe (dp 1) builds them over CP only. Per layer, once
  /// a step (gradient reduce-scatters, parameter all-gathers), at the probe's size; and one
  /// DP-group all-gather's ops at the probe's size (schedule::dp_group_gather_ops).
  double dp_step_ops = 0, probe_group_ops = 0;
  /// The same at a mesh's size (scaled_to_mesh): per layer and micro-batch (ZeRO-3's parameter
  /// gathers, which the probe leaves out) and per layer once a step.
  double shared_ops = 0, shared_step_ops = 0;
  /// Whether the layer's traffic crosses spine links (then replicas that share leaves meet, and
  /// every replica is built: schedule/replicas.hpp).
  bool uses_spines = false;
  bool built = false;  ///< false: the reduced scenario does not build (nothing above is known)
};
/// Built with ZeRO stage min(sc's, 2): ZeRO-3's gathers are counted by scaled_to_mesh. Its DP
/// collectives are scaled to sc's own mesh.
LayerProbe probe_layer(const scenario::Scenario& sc);

/// `lp` (a probe of the same layer geometry) with its DP collectives counted for `sc`'s mesh:
/// its DP degree and ZeRO stage, which the probe need not share (`cpsim plan` probes each
/// TP x CP x scheme x recomputation once). `group_ops`: dp_group_gather_ops(sc, topo).
LayerProbe scaled_to_mesh(LayerProbe lp, const scenario::Scenario& sc, double group_ops);

/// Whether `sc`'s build simulates every DP replica (replica symmetry refused), as far as the
/// probe can tell (schedule/replicas.hpp; a replica that fills no whole leaf group is checked
/// by the probe's spine use).
bool builds_every_replica(const scenario::Scenario& sc, const model::Topology& topo, const LayerProbe& lp);

/// The ops of `sc`'s step graph estimated from its layer probe: the replica's ops x the
/// replicas built, plus the DP collectives, x layers x micro-batches. Within 0.8-1.25 x the
/// built graph on the bundled scenarios (tests/app/compute_bound_test.cpp).
double estimate_graph_ops(const scenario::Scenario& sc, const LayerProbe& lp, bool every_replica);

}  // namespace cpsim::app
