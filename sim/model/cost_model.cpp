// Kernel cost models: FLOP conventions shared by every strategy, and the factory that picks one
// (roofline_model.cpp: efficiency curves fitted to published kernel figures; profile_model.cpp:
// a profile table interpolated between measured shapes, falling back to the roofline outside).
#include "model/cost_model.hpp"

#include "model/stack_kernels.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/profile_model.hpp"
#include "model/roofline_model.hpp"
#include "model/unfused_attention.hpp"
#include "scenario/profile_csv.hpp"

namespace cpsim::model {

const char* cost_source_name(CostSource s) {
  switch (s) {
    case CostSource::Measured:
      return "measured";
    case CostSource::Published:
      return "published";
    case CostSource::Derived:
      return "derived";
    case CostSource::Roofline:
      return "roofline";
  }
  return "?";
}

double attention_flops(const AttentionCall& c) {
  const double fwd = 4.0 * c.batch * static_cast<double>(c.q_len) * static_cast<double>(c.kv_len) *
                     c.unmasked_fraction * c.heads_q * c.head_dim;
  return c.backward ? 2.5 * fwd : fwd;
}

Cost backward_at_forward_rate(Cost bwd, const Cost& fwd) {
  if (!(bwd.flops > 0) || !(fwd.flops > 0) || !(fwd.time_s > 0)) return bwd;
  const double floor = fwd.time_s * bwd.flops / fwd.flops;
  if (bwd.time_s >= floor) return bwd;
  bwd.time_s = floor;
  bwd.extrapolated = fwd.extrapolated;
  bwd.source = fwd.source == CostSource::Roofline ? CostSource::Roofline : CostSource::Derived;
  bwd.origin = fwd.origin;  // the forward's table or model set the rate
  return bwd;
}

double linear_attention_flops(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                              bool backward) {
  // Chunkwise Gated DeltaNet, per chunk of C tokens and per head, with K = key_dim,
  // V = value_dim and S the K x V state (Yang et al., "Parallelizing Linear Transformers with
  // the Delta Rule over Sequence Length", NeurIPS 2024, sec. 3: WY representation and UT
  // transform; Yang, Kautz & Hatamizadeh, "Gated Delta Networks", ICLR 2025, sec. 3: the gated
  // chunkwise form; the flash-linear-attention chunk kernels follow it):
  //   A = tril((beta K) K^T)                2 C^2 K
  //   T = (I + A)^-1, forward substitution  C^3 / 3
  //   W = T (beta K), U = T (beta V)        2 C^2 K + 2 C^2 V
  //   V' = U - W S                          2 C K V   (inter-chunk)
  //   O = Q S + tril(Q K^T) V'              2 C K V + 2 C^2 K + 2 C^2 V
  //   S <- g S + K^T V'                     2 C K V
  // Total C^2 (6 K + 4 V) + 6 C K V + C^3 / 3 per chunk; per token C (6 K + 4 V) + 6 K V + C^2 / 3.
  const double c = chunk, k = key_dim, v = value_dim;
  const double per_token = c * (6 * k + 4 * v) + 6 * k * v + c * c / 3;
  const double fwd = static_cast<double>(tokens) * heads * per_token;
  return backward ? 3 * fwd : fwd;
}

std::unique_ptr<CostModel> CostModel::roofline(const scenario::GpuSpec& gpu) {
  return std::make_unique<RooflineModel>(gpu);
}

std::unique_ptr<CostModel> CostModel::from_profile(const std::string& csv_path,
                                                   const scenario::GpuSpec& gpu) {
  return std::make_unique<ProfileModel>(scenario::read_profile_csv(csv_path), gpu);
}

std::unique_ptr<CostModel> CostModel::make(const std::string& choice,
                                           const scenario::GpuSpec& gpu) {
  scenario::CostSpec spec;
  spec.profile = choice;
  return make(spec, gpu);
}

std::unique_ptr<CostModel> CostModel::make(const scenario::CostSpec& spec,
                                           const scenario::GpuSpec& gpu) {
  const scenario::AttnImpl impl = scenario::resolve_impl(spec.attention_kernel, gpu.arch);
  if (impl == scenario::AttnImpl::Fa3 && gpu.arch != scenario::GpuArch::Hopper) {
    throw std::invalid_argument("cost.attention_kernel: fa3 runs on Hopper GPUs only; '" +
                                gpu.name + "' is " + scenario::arch_name(gpu.arch));
  }
  if (spec.profile == "none") {
    if (impl == scenario::AttnImpl::Unfused)
      return std::make_unique<UnfusedAttentionModel>(std::make_unique<RooflineModel>(gpu, impl), gpu, spec.stack);
    return std::make_unique<RooflineModel>(gpu, impl);
  }
  // GEMMs: the bundled measured table for this GPU where it covers a shape, whatever prices
  // attention; `none` keeps GEMMs on the tile/wave model.
  std::shared_ptr<const GemmTable> gemms;
  if (const std::string gemm_path = scenario::find_bundled_gemm_profile(gpu); !gemm_path.empty()) {
    gemms = std::make_shared<const GemmTable>(scenario::read_gemm_profile_csv(gemm_path), gpu);
  }
  // Gated DeltaNet: the bundled profile for this GPU whatever prices attention (cost.profile
  // names an attention profile); `none` keeps both on the roofline.
  std::shared_ptr<const GdnProfile> gdn;
  if (const std::string gdn_path = scenario::find_bundled_gdn_profile(gpu); !gdn_path.empty()) {
    gdn = std::make_shared<const GdnProfile>(scenario::read_gdn_profile_csv(gdn_path));
  }
  if (impl == scenario::AttnImpl::Unfused) {
    // No attention kernel to look up: the path's GEMMs go through the GEMM cost (the measured
    // table where it covers a shape, else the tile/wave model), its softmax kernels through
    // the measured memory rates. An attention profile would price a kernel the run never calls.
    if (spec.profile != "auto" && spec.profile != "none")
      throw std::invalid_argument("cost.attention_kernel: unfused is priced from its GEMMs and memory kernels, "
                                  "not an attention profile; cost.profile must be auto or none, got '" +
                                  spec.profile + "'");
    return std::make_unique<UnfusedAttentionModel>(std::make_unique<RooflineModel>(gpu, impl, gdn, gemms), gpu,
                                                   spec.stack);
  }
  std::string path = spec.profile;
  if (path == "auto") {
    path = scenario::find_bundled_profile(gpu, scenario::impl_name(impl));
    if (path.empty()) {
      // No measured or published attention figures for this GPU and kernel: the tile model
      // prices every call, and the summary and -v say there was no row.
      auto m = std::make_unique<RooflineModel>(gpu, impl, gdn, gemms);
      m->mark_unprofiled();
      return m;
    }
  }
  return std::make_unique<ProfileModel>(scenario::read_profile_csv(path), gpu, impl, gdn, gemms);
}

Cost CostModel::memory_bound(double bytes, MemClass cls, const char* kernel) const {
  return memory_kernels({{kernel, cls, std::max(0.0, bytes), 1}});
}

}  // namespace cpsim::model
