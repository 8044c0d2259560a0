#pragma once
/// The attention mask of one kernel call, and its name, written once: the profile CSV parser,
/// the schedule's shapes, the trace, `cpsim kernels` and the cost model all use these.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cpsim::scenario {

/// Full: every (query, key) pair computed. Causal: key position <= query position, query and
/// key blocks aligned on the diagonal. CausalOffset: causal with the key block wholly or partly
/// before the query block (a ring step's off-diagonal block). Document: causal within documents
/// (varlen / block-diagonal). SlidingWindow: a causal band of `window` keys per query (two
/// partially masked tile diagonals, one on each edge of the band).
enum class Mask : uint8_t { Full = 0, Causal = 1, Document = 2, CausalOffset = 3, SlidingWindow = 4 };

inline constexpr std::string_view kMaskNames[] = {"full", "causal", "document", "causal-offset", "sliding-window"};

inline constexpr const char* mask_name(Mask m) {
  return kMaskNames[static_cast<size_t>(m)].data();
}

inline std::optional<Mask> parse_mask(std::string_view s) {
  for (size_t i = 0; i < std::size(kMaskNames); ++i)
    if (kMaskNames[i] == s) return static_cast<Mask>(i);
  return std::nullopt;
}

/// "full, causal, document, causal-offset or sliding-window" for messages.
inline std::string mask_choices() {
  std::string s;
  for (size_t i = 0; i < std::size(kMaskNames); ++i) {
    if (i > 0) s += i + 1 == std::size(kMaskNames) ? " or " : ", ";
    s += kMaskNames[i];
  }
  return s;
}

}  // namespace cpsim::scenario
