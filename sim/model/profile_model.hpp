#pragma once
/// Profile-table kernel costs (internal to sim/model; callers use CostModel::from_profile/make).
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/cost_model.hpp"
#include "model/roofline_model.hpp"
#include "scenario/profile_csv.hpp"

namespace cpsim::model {

/// Attention interpolated between the table's rows (the table is parsed by the scenario stage);
/// other kernels, and attention shapes outside the table, priced by the roofline.
class ProfileModel final : public CostModel {
 public:
  /// Attention curves from the table's BF16 rows; its FP8 rows (dtype fp8...) make a profile
  /// of their own, read only for the FP8/BF16 ratio (fp8_attention_ratio).
  ProfileModel(const scenario::ProfileTable& table, const scenario::GpuSpec& gpu,
               scenario::AttnImpl impl = scenario::AttnImpl::Auto,
               std::shared_ptr<const GdnProfile> gdn = nullptr,
               std::shared_ptr<const GemmTable> gemm_table = nullptr);
  Cost attention(const AttentionCall& c) const override;
  /// The BF16 price over the FP8 rows' price of the same call, where both are read from this
  /// profile's rows (not extrapolated).
  std::optional<Fp8Ratio> fp8_attention_ratio(const AttentionCall& c) const override;
  using CostModel::gemm;
  Cost gemm(const GemmCall& c) const override { return fallback_.gemm(c); }
  Cost memory_kernels(const std::vector<MemKernel>& ks) const override { return fallback_.memory_kernels(ks); }
  Cost linear_attention(int64_t tokens, int heads, int key_dim, int value_dim, int chunk,
                        bool backward) const override {
    return fallback_.linear_attention(tokens, heads, key_dim, value_dim, chunk, backward);
  }
  Cost gdn(const GdnCall& c) const override { return fallback_.gdn(c); }
  std::string describe() const override;

 private:
  /// The profile of the table's rows of one number format: "bf16" or "fp8" (every fp8 recipe).
  ProfileModel(const scenario::ProfileTable& table, const scenario::GpuSpec& gpu, scenario::AttnImpl impl,
               std::shared_ptr<const GdnProfile> gdn, std::shared_ptr<const GemmTable> gemm_table,
               const std::string& format);
  /// One interpolation curve: log(one wave's time) piecewise linear in log(one CTA's FLOPs)
  /// through the rows' points,
  /// made monotone (time never falls as FLOPs grow) by pooling adjacent violators.
  struct Curve {
    std::vector<double> log_flops, log_time;
    CostSource source = CostSource::Measured;  ///< the weakest source among its points
  };
  using CurveKey = std::tuple<bool, int, int>;  ///< backward, head dim, mask class
  using ExactKey = std::tuple<bool, int64_t, int64_t, int, int64_t, int, int, int>;

  static ExactKey exact_key(const AttentionCall& c);
  /// CTAs of one (batch, head) slice, unrounded: query rows / tile rows (forward), key columns /
  /// tile columns (backward), tile_shape() of this implementation.
  double tile_extent(const AttentionCall& c) const;
  /// Waves of the call's CTAs (every slice's whole tiles) over the SMs.
  double waves(const AttentionCall& c) const;
  /// FLOPs of one CTA: the call's FLOPs over its slices and tile_extent (continuous, so a
  /// longer call never maps to a smaller CTA).
  double cta_flops(const AttentionCall& c, double flops) const;
  const Curve* find_curve(bool bwd, int d, int cls) const;
  static double interpolate(const Curve& curve, double log_flops);
  /// One wave's time on `curve` at log CTA FLOPs x (x at or past its first point): interpolated,
  /// or past its last point at that point's rate (source then Derived).
  static double wave_time(const Curve& curve, double x, CostSource& source);
  /// The price before the backward's bound by its forward.
  Cost priced(const AttentionCall& c) const;
  /// Tolerance on log CTA FLOPs when a call meets a curve's end: the CSV's unmasked fractions
  /// have six decimals (a 512-token causal row's 0.500977 for 513/1024), 1e-6 relative.
  static constexpr double kLogTolerance = 1e-5;

  std::string path_;
  std::string file_;  ///< path_'s file name: the origin of the prices the table sets
  RooflineModel fallback_;
  std::map<CurveKey, Curve> curves_;
  std::map<ExactKey, std::pair<double, CostSource>> exact_;
  int sms_ = 132;
  int rows_ = 0;
  std::string source_names_, gpus_;
  std::unique_ptr<const ProfileModel> fp8_;  ///< the FP8 rows' profile; null without FP8 rows
  std::string fp8_origin_;
};

}  // namespace cpsim::model
