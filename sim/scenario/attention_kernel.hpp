#pragma once
/// Attention kernel implementations (`cost.attention_kernel`) and GPU architectures (`arch:` in
/// platforms/gpus.yaml), names written once for the parser, the cost model and its messages.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cpsim::scenario {

/// Auto: the best available for the GPU's architecture (FA3 on Hopper, FA2 on Ampere/Ada,
/// cuDNN on Blackwell). Fa2/Fa3: FlashAttention-2/3; Cudnn: cuDNN's fused attention;
/// Flex: PyTorch FlexAttention (Triton-generated). Unfused: no attention kernel, the s x s
/// scores materialised between batched GEMMs (Megatron `--attention-backend unfused`, PyTorch's
/// math SDPA backend; model/unfused_attention.hpp).
enum class AttnImpl : uint8_t { Auto, Fa2, Fa3, Cudnn, Flex, Unfused };
inline constexpr std::string_view kAttnImplNames[] = {"auto", "fa2", "fa3", "cudnn", "flex", "unfused"};

enum class GpuArch : uint8_t { Ampere, Ada, Hopper, Blackwell };
inline constexpr std::string_view kGpuArchNames[] = {"ampere", "ada", "hopper", "blackwell"};

template <class E, size_t N>
std::optional<E> parse_enum(std::string_view s, const std::string_view (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

template <size_t N>
std::string enum_choices(const std::string_view (&names)[N]) {
  std::string s;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) s += i + 1 == N ? " or " : ", ";
    s += names[i];
  }
  return s;
}

inline const char* impl_name(AttnImpl i) { return kAttnImplNames[static_cast<size_t>(i)].data(); }
inline const char* arch_name(GpuArch a) { return kGpuArchNames[static_cast<size_t>(a)].data(); }

/// What `auto` means on `arch`.
inline AttnImpl resolve_impl(AttnImpl i, GpuArch arch) {
  if (i != AttnImpl::Auto) return i;
  switch (arch) {
    case GpuArch::Hopper: return AttnImpl::Fa3;
    case GpuArch::Blackwell: return AttnImpl::Cudnn;
    default: return AttnImpl::Fa2;
  }
}

}  // namespace cpsim::scenario
