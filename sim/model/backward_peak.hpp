#pragma once
/// The backward's transient peak: what the autograd engine holds beside the saved activations.
/// Two moments compete. At the loss, the logits' cross-entropy buffers (vocab x tokens) on the
/// stage that computes the loss; in a block's backward, that block's working set: the gradients
/// of its output and input, then the attention backward's buffers (FlashAttention's fp32 dQ
/// accumulator, dO, dQ, dK, dV) or the MLP's (SwiGLU's three ffn-wide gradients), whichever is
/// larger. The saved activations (model/transformer.hpp) and FSDP2's unsharded copies
/// (estimate_memory) are terms of their own. No SimGrid, no graph.
#include <string>
#include <vector>

#include "model/transformer.hpp"
#include "scenario/specs.hpp"

namespace cpsim::model {

/// Term names, written once for estimate_memory, the per-stage split and the tests.
inline constexpr const char* kLossTermPrefix = "logits";
inline constexpr const char* kBlockBackwardPrefix = "backward working set: ";

struct BackwardPeak {
  MemoryTerm loss;                  ///< the logits and the loss's buffers at their peak
  std::vector<MemoryTerm> block;    ///< one block's backward working set at its peak
  double block_bytes = 0;           ///< the sum of `block`
  double attention_bytes = 0;       ///< the attention backward's part (0 without softmax layers)
  double mlp_bytes = 0;             ///< the MLP backward's part
};

/// The two candidates for one rank of `sc` (its first pipeline stage's layers).
BackwardPeak backward_peak(const scenario::Scenario& sc);

/// Adds the terms of the moment that peaks: the loss's on a stage that `holds_loss` when they
/// are at least one block's working set, else the block's, each naming the other in its source.
/// `recomputing`: the activations of the block being recomputed
/// (recomputing_activation_bytes), which only the block's moment holds: a term of the block's.
void add_backward_peak_terms(MemoryEstimate& est, const scenario::Scenario& sc, bool holds_loss,
                             double recomputing = 0);

/// Whether `t` is one of the terms add_backward_peak_terms adds.
bool is_backward_peak_term(const MemoryTerm& t);

}  // namespace cpsim::model
