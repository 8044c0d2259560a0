#pragma once
/// Gated DeltaNet costs (internal to sim/model; callers use CostModel::gdn): the kernels that
/// flash-linear-attention's chunk_gated_delta_rule runs, each with its FLOPs and bytes from the
/// kernel sources, priced by a roofline whose constants are fitted to the published FLA figures
/// (kernels/profiles/make_gdn_published.py), and a profile of those figures interpolated by
/// tokens per sequence and value heads x sequences.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/cost_model.hpp"
#include "scenario/profile_csv.hpp"

namespace cpsim::model {

/// One kernel launch. `sequential`: a recurrence over the chunks of each sequence (one CTA per
/// (value block, head, sequence) walks its chunks in order), so it takes at least
/// `steps` x the per-chunk latency whatever the FLOPs.
struct GdnKernel {
  const char* name;
  double flops, bytes;
  bool sequential = false;
  double steps = 0;  ///< chunks walked in order (sequential kernels)
  double ctas = 0;   ///< CTAs of a sequential kernel (value blocks x heads x sequences)
};

/// The kernels of a call's part, in launch order (FLA 0.5, fla/ops/gated_delta_rule/chunk.py
/// and fla/ops/cp/chunk_delta_h.py).
std::vector<GdnKernel> gdn_kernels(const GdnCall& c);

/// Kernel-by-kernel roofline on `gpu` (source roofline). `sms`: the GPU's SM count.
Cost gdn_roofline(const GdnCall& c, const scenario::GpuSpec& gpu, int sms);

/// Published / measured whole-call figures (direction, key and value head dim), interpolated in
/// log(time) over log(tokens per sequence) along a curve per value heads x sequences (the
/// recurrence kernels' grid: heads and sequences run side by side), then in log(time) over
/// log(heads x sequences) between the two nearest curves that cover the tokens. Several rows
/// of one (tokens, heads x sequences): the one nearest in sequences, then in key heads.
class GdnProfile {
 public:
  explicit GdnProfile(const scenario::GdnProfileTable& table);
  /// The price of a Whole call, or nothing when no pair of curves covers it.
  std::optional<Cost> price(const GdnCall& c) const;
  std::string describe() const;
  const std::string& path() const { return path_; }

 private:
  struct Point {
    double seqs, heads_k_total, time_s;
    CostSource source;
  };
  using CurveKey = std::tuple<bool, int, int, int>;  ///< backward, key dim, value dim, chunk
  /// heads_v x seqs -> tokens per sequence -> the rows timed at that shape
  using Curves = std::map<int64_t, std::map<int64_t, std::vector<Point>>>;
  std::optional<std::pair<double, CostSource>> on_curve(
      const std::map<int64_t, std::vector<Point>>& curve, const GdnCall& c) const;

  std::string path_;
  std::map<CurveKey, Curves> curves_;
  int rows_ = 0;
};

}  // namespace cpsim::model
