#pragma once
/// Roofline kernel costs (internal to sim/model; callers use CostModel::roofline/make).
#include <memory>
#include <string>

#include "model/cost_model.hpp"
#include "model/gdn_cost.hpp"
#include "model/gemm_cost.hpp"

namespace cpsim::model {

/// FLOPs / (peak x efficiency(shape)), bytes / HBM bandwidth, with a per-kernel launch floor.
class RooflineModel final : public CostModel {
 public:
  /// `gdn`: published / measured Gated DeltaNet figures that price the calls they cover (else
  /// the kernel-by-kernel roofline of gdn_cost.hpp).
  explicit RooflineModel(const scenario::GpuSpec& gpu,
                         scenario::AttnImpl impl = scenario::AttnImpl::Auto,
                         std::shared_ptr<const GdnProfile> gdn = nullptr,
                         std::shared_ptr<const GemmTable> gemm_table = nullptr);
  Cost attention(const AttentionCall& c) const override;
  /// The tile-level price of one direction, before the backward's bound by its forward.
  Cost priced(const AttentionCall& c) const;
  using CostModel::gemm;
  Cost gemm(const GemmCall& c) const override;
  Cost memory_kernels(const std::vector<MemKernel>& ks) const override;
  Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                        bool backward) const override;
  Cost gdn(const GdnCall& c) const override;
  std::string describe() const override;
  /// Chosen because no bundled attention profile covers this GPU and kernel (cost.profile auto):
  /// attention costs then say so (origin) and -v logs each shape once.
  void mark_unprofiled() { unprofiled_ = true; }
  const scenario::GpuSpec& gpu() const { return gpu_; }
  int sms() const { return sms_; }
  scenario::AttnImpl impl() const { return impl_; }

 private:
  scenario::GpuSpec gpu_;
  scenario::AttnImpl impl_;
  int sms_ = 132;
  bool unprofiled_ = false;
  std::shared_ptr<const GdnProfile> gdn_;
  std::shared_ptr<const GemmTable> gemm_table_;
};

}  // namespace cpsim::model
