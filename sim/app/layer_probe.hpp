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
  /// backward (recomputation included), as the cost model prices it, plus its forced waits
  /// on TP collectives (tp_wait_s). A lower bound on that time in any step of the same layer
  /// geometry, since a GPU's kernels run one after another on its compute stream. -1 when layers or micro-batches differ by draw (MoE routing, drawn
  /// documents) or by GPU (perturbations), where one sample bounds nothing.
  double compute_s = -1;
  /// Of compute_s, the waits on TP collectives: a compute op fed by one (the SP all-gather's
  /// GEMM, the reduce-scatter's norm) cannot start before the collective ends, and the op before
  /// it on the same in-order compute stream fed the collective, so that gap is idle in any step
  /// (the layer's TP ranks run the same ops at the same times, so the collective starts and
  /// lasts as in the probe; its transfers share no link with other groups on the analytic
  /// engine). Measured by replaying the probe on the analytic engine; 0 without TP or with TP
  /// communication overlap (TransformerEngine's chunked GEMMs hide part of it).
  double tp_wait_s = 0;
  /// Per micro-batch, the last pipeline stage's LM head and loss (forward and backward, their
  /// TP waits included) on the GPU of compute_s: compute the layers' bound leaves out (0 where
  /// compute_s is unknown).
  double head_s = 0;
  /// Ops per layer and micro-batch of one replica (all its GPUs), its DP collectives aside: a
  /// step's graph has at least layers x micro-batches x this many per replica it builds.
  double ops = 0;
  /// The same in a lean build that mirrors TP ranks (schedule/replicas.hpp tp_mirror: TP index
  /// 0 built, the others only in the TP collectives); `ops` where nothing is mirrored.
  double mirrored_ops = 0;
  bool tp_mirrored = false;
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

/// A lower bound on `sc`'s step from its probe (-1 where compute_s is unknown): the last
/// pipeline stage works layers / pp x compute_s + head_s per micro-batch, and (1F1B) cannot
/// start before the first micro-batch's forward crossed the pp - 1 stages before it nor end
/// before its last backward crossed them back: (pp - 1) / virtual_stages x a stage's layers.
double step_lower_bound(const LayerProbe& lp, const scenario::Scenario& sc);

/// `lp` (a probe of the same layer geometry) with its DP collectives counted for `sc`'s mesh:
/// its DP degree and ZeRO stage, which the probe need not share (`cpsim plan` probes each
/// TP x CP x scheme x recomputation once). `group_ops`: dp_group_gather_ops(sc, topo).
LayerProbe scaled_to_mesh(LayerProbe lp, const scenario::Scenario& sc, double group_ops);

/// `lp` scaled to a lean build's graph (the analytic step time alone, app's step_time): its
/// ops per layer with TP ranks mirrored, and its DP collectives those of TP index 0 only.
LayerProbe lean_probe(LayerProbe lp, const scenario::Scenario& sc);

/// Whether `sc`'s build simulates every DP replica (replica symmetry refused), as far as the
/// probe can tell (schedule/replicas.hpp; a replica that fills no whole leaf group is checked
/// by the probe's spine use).
bool builds_every_replica(const scenario::Scenario& sc, const model::Topology& topo, const LayerProbe& lp);

/// The ops of `sc`'s step graph estimated from its layer probe: the replica's ops x the
/// replicas built, plus the DP collectives, x layers x micro-batches. Within 0.8-1.25 x the
/// built graph on the bundled scenarios (tests/app/compute_bound_test.cpp).
double estimate_graph_ops(const scenario::Scenario& sc, const LayerProbe& lp, bool every_replica);

}  // namespace cpsim::app
