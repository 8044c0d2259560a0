#pragma once
/// The scenario keys' enum values and their names, written once, in enum order: the loader
/// accepts these names, the result JSON's `scenario` echo writes them (so the echo loads back),
/// and labels and commands print them. (The kernel mask, the attention kernel implementations
/// and GPU architectures have theirs in mask.hpp and attention_kernel.hpp.)
#include <string>
#include <string_view>
#include <vector>

#include "scenario/attention_kernel.hpp"
#include "scenario/specs.hpp"

namespace cpsim::scenario {

inline constexpr std::string_view kModeNames[] = {"train", "prefill"};
inline constexpr std::string_view kLossNames[] = {"materialized", "chunked"};
inline constexpr std::string_view kRecomputeNames[] = {"none", "selective", "full"};
inline constexpr std::string_view kSchemeNames[] = {"ring", "allgather", "ulysses", "usp", "double-ring"};
inline constexpr std::string_view kLayoutNames[] = {"contiguous", "zigzag", "striped"};
inline constexpr std::string_view kLinearSchemeNames[] = {"state-allgather", "relay", "a2a"};
inline constexpr std::string_view kEngineNames[] = {"simgrid", "analytic"};
inline constexpr std::string_view kScopeNames[] = {"attention-layer", "layer", "step"};
inline constexpr std::string_view kUlyssesPlacementNames[] = {"intra-node", "inter-node"};
inline constexpr std::string_view kPerturbLinkNames[] = {"nvlink", "pcie", "nic"};
inline constexpr std::string_view kLinkDirectionNames[] = {"up", "down", "both"};
inline constexpr std::string_view kJitterDistNames[] = {"normal", "lognormal"};
inline constexpr std::string_view kCollectiveModelNames[] = {"auto", "steps", "pipelined"};
inline constexpr std::string_view kSymmetryNames[] = {"auto", "off"};
inline constexpr std::string_view kFabricNames[] = {"nvswitch", "pcie"};
inline constexpr std::string_view kModelMaskNames[] = {"causal", "full", "sliding-window"};
/// NcclSpec::arch indexes this (NCCL's tuning.cc compute-capability index).
inline constexpr std::string_view kNcclArchNames[] = {"volta", "ampere", "hopper", "blackwell"};
/// `precision:` (TrainingSpec::fp8) and `document_sharding:` (AttentionSpec::per_document_sharding).
inline constexpr std::string_view kPrecisionNames[] = {"bf16", "fp8"};
inline constexpr std::string_view kStackNames[] = {"megatron-te", "torch-eager", "torch-compile"};
inline constexpr std::string_view kFp8RecipeNames[] = {"delayed", "tensorwise", "blockwise", "mxfp8", "nvfp4"};
inline constexpr std::string_view kDocumentShardingNames[] = {"whole-sequence", "per-document"};

/// The name of `e` in its table.
template <class E, size_t N>
const char* name_of(E e, const std::string_view (&names)[N]) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i].data() : "?";
}

/// A table as the list the loader's as_choice() takes.
template <size_t N>
std::vector<std::string> choices(const std::string_view (&names)[N]) {
  return {std::begin(names), std::end(names)};
}

}  // namespace cpsim::scenario
