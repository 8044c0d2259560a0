#pragma once
/// Internal to the scenario stage: the mixture-of-experts, MLA and FP8 keys, read
/// into the specs the other builders produce.
#include "scenario/specs.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {

/// Model keys `attention_type`, `mla`, `moe` (r must allow them). Called after heads and
/// head_dim are read; MLA then sets heads_kv = heads_q and head_dim = (qk + v) / 2.
void read_moe_model(const MapReader& r, ModelSpec& m);

/// parallel.ep / expert_tp / tp_comm_overlap (r must allow them).
void read_moe_parallel(const MapReader& r, ParallelSpec& p);
/// training.precision / fp8_attention (r must allow them).
void read_precision(const MapReader& r, TrainingSpec& t);

/// The checks that relate them to the model, the mesh and the GPU; `par` / `training` are the
/// sections to point at (the scenario root when absent).
void check_moe(const Scenario& s, const Node& par, const Node& training);

}  // namespace cpsim::scenario::detail
