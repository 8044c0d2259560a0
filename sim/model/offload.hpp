#pragma once
/// Activation CPU offloading (Megatron --cpu-offloading-num-layers, TransformerEngine's CPU
/// offload context): what one offloaded layer moves and how long the copy takes. No SimGrid.
#include "scenario/specs.hpp"

namespace cpsim::model {

/// Bytes of saved activations one offloaded layer moves to host memory (and back) per
/// micro-batch on one rank: the layer's activations as stage_activation_bytes counts them.
double offload_layer_bytes(const scenario::Scenario& sc);

/// Seconds one copy of `bytes` between a GPU and host memory takes, one direction.
double host_copy_seconds(double bytes);

/// Whether `layer`'s activations are offloaded: the first training.offload_layers layers.
bool layer_offloaded(const scenario::Scenario& sc, int layer);

/// One rank's optimizer step on `params` host-resident parameters under Megatron's optimizer
/// CPU offload (HybridDeviceOptimizer with param_update_in_fp32): their fp32 gradients copied
/// to pinned host memory, a CPU Adam over fp32 master weights and m, v, and the updated fp32
/// weights copied back into the GPU's parameters, one after the other (Megatron's default,
/// overlap_cpu_optimizer_d2h_h2d off).
struct OptimizerOffloadTime {
  double d2h_s = 0;       ///< gradients to the host, 4 B per parameter
  double cpu_step_s = 0;  ///< Adam on the host
  double h2d_s = 0;       ///< updated weights back, 4 B per parameter
};
OptimizerOffloadTime optimizer_offload_time(const scenario::Scenario& sc, double params);

}  // namespace cpsim::model
