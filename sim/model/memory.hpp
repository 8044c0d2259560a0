#pragma once
/// Per-GPU memory by rank class: the terms of estimate_memory (transformer.hpp) split the way a
/// pipeline really holds them. Under 1F1B, stage k keeps min(pp - k, micro_batches) micro-batches
/// of activations alive (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training
/// on GPU Clusters", section 2.2.1), and only the last stage holds the logits and the loss.
/// estimate_memory charges every rank with stage 0's activations and the last stage's logits,
/// an upper bound; this file names which rank class is the real peak. No SimGrid, no graph.
#include <string>
#include <vector>

#include "model/transformer.hpp"
#include "scenario/specs.hpp"

namespace cpsim::model {

struct RankClassMemory {
  std::string name;        ///< "every rank", "first stage (pp 0)", "middle stages (pp 1-2)", ...
  int first_stage = 0;     ///< the pipeline stages this class stands for
  int last_stage = 0;
  MemoryEstimate memory;   ///< terms, peak, capacity, fits, verdict for one GPU of the class
};

/// One entry per rank class: a single "every rank" class without pipeline parallelism; else
/// the first stage, the middle stages (when pp > 2) and the last stage. Activations are listed
/// per layer kind ("activations: full-attention layers (16)"), other terms as estimate_memory
/// names them.
std::vector<RankClassMemory> memory_by_rank_class(const scenario::Scenario& sc);

/// The class with the largest peak (the first one on ties): what decides whether a run fits.
MemoryEstimate peak_rank_memory(const scenario::Scenario& sc);

/// The memory of what the scenario's scope simulates: one attention layer's for scope
/// attention-layer (attention_layer_memory), else the peak rank class's (peak_rank_memory).
MemoryEstimate simulated_memory(const scenario::Scenario& sc);

}  // namespace cpsim::model
