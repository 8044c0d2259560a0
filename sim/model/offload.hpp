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

}  // namespace cpsim::model
