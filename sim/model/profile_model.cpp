// Profile-table attention costs: exact rows, else log-log interpolation along the curve of the
// call's direction / head dim / mask class, else the roofline (marked extrapolated).
#include "model/profile_model.hpp"
#include "model/cost_source.hpp"

#include "model/tile_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "log/log.hpp"

namespace cpsim::model {
namespace {

/// Shape class a profile curve is keyed by: full, causal (diagonal, offset and sliding-window
/// bands, which no public benchmark profiles separately), document.
int mask_class(scenario::Mask m) {
  return m == scenario::Mask::CausalOffset || m == scenario::Mask::SlidingWindow
             ? 1
             : static_cast<int>(m);
}

const char* const kClassName[] = {"full", "causal", "document"};

/// Which call was priced outside the profile and by which rule: one line per distinct shape.
void log_extrapolated(const AttentionCall& c, const char* rule, const std::string& path) {
  char buf[480];
  std::snprintf(buf, sizeof buf,
                "cost: attention %s q %lld kv %lld %s, %d/%d heads d%d, batch %d: %s, priced by the tile-level "
                "roofline (extrapolated; profile %s)",
                c.backward ? "bwd" : "fwd", static_cast<long long>(c.q_len), static_cast<long long>(c.kv_len),
                kClassName[mask_class(c.mask)], c.heads_q, c.heads_kv, c.head_dim, c.batch, rule,
                path.substr(path.find_last_of('/') + 1).c_str());
  log::once(log::Level::Info, buf, buf);
}

}  // namespace

// Why per wave: a FlashAttention-style kernel runs one thread block (CTA) per 128-row tile of
// queries (forward; per column tile of keys backward) of each (batch, head) slice, in waves
// over the SMs (tile_cost.hpp). Its time is the waves times one wave's time, and one wave's
// time depends on the work of one CTA (its loop over the other side), not on how many slices
// there are. So the curves interpolate one wave's time against one CTA's FLOPs, and a call's
// price is that time times the call's waves: the price grows with heads and batch only in
// whole waves, and the rate moves only where a wave fills (at most by one wave in `waves`),
// whatever the head count of the rows it was read from (they fold batch x heads = 16K tokens).
double ProfileModel::tile_extent(const AttentionCall& c) const {
  const TileShape t = tile_shape(fallback_.impl(), c.head_dim, c.backward, c.mask != scenario::Mask::Full);
  return c.backward ? static_cast<double>(c.kv_len) / t.n : static_cast<double>(c.q_len) / t.m;
}

double ProfileModel::waves(const AttentionCall& c) const {
  const double slices = static_cast<double>(c.batch) * c.heads_q;
  return std::ceil(slices * std::ceil(tile_extent(c) - 1e-9) / sms_);
}

double ProfileModel::cta_flops(const AttentionCall& c, double flops) const {
  return flops / (static_cast<double>(c.batch) * c.heads_q * tile_extent(c));
}

ProfileModel::ExactKey ProfileModel::exact_key(const AttentionCall& c) {
  return {c.backward, c.q_len, c.kv_len, static_cast<int>(c.mask),
          std::llround(c.unmasked_fraction * 1e6), c.heads_q, c.heads_kv, c.head_dim};
}

const ProfileModel::Curve* ProfileModel::find_curve(bool bwd, int d, int cls) const {
  const auto it = curves_.find({bwd, d, cls});
  return it == curves_.end() ? nullptr : &it->second;
}

double ProfileModel::interpolate(const Curve& curve, double x) {
  // (x at or above the last point: its time; wave_time extends past it.)
  const auto& xs = curve.log_flops;
  const auto& ys = curve.log_time;
  const size_t i =
      static_cast<size_t>(std::lower_bound(xs.begin(), xs.end(), x - 1e-9) - xs.begin());
  if (i >= xs.size()) return ys.back();
  if (i == 0 || std::fabs(xs[i] - x) <= 1e-9) return ys[i];
  const double w = (x - xs[i - 1]) / (xs[i] - xs[i - 1]);
  return ys[i - 1] + w * (ys[i] - ys[i - 1]);
}

/// The number format a row's dtype names: fp8 for every FP8 recipe (fp8, fp8-tensorwise, ...),
/// else bf16 (a 16-bit row: FP16 runs the same tensor-core rate).
static std::string row_format(const std::string& dtype) { return dtype.rfind("fp8", 0) == 0 ? "fp8" : "bf16"; }

ProfileModel::ProfileModel(const scenario::ProfileTable& table, const scenario::GpuSpec& gpu,
                           scenario::AttnImpl impl, std::shared_ptr<const GdnProfile> gdn,
                           std::shared_ptr<const GemmTable> gemm_table)
    : ProfileModel(table, gpu, impl, std::move(gdn), std::move(gemm_table), "bf16") {
  const bool has_fp8 = std::any_of(table.rows.begin(), table.rows.end(),
                                   [](const scenario::ProfileRow& r) { return row_format(r.dtype) == "fp8"; });
  if (has_fp8) {
    fp8_.reset(new ProfileModel(table, gpu, impl, nullptr, nullptr, "fp8"));
    fp8_origin_ = "FP8 at the FP8/BF16 ratio of " + file_ + "'s FP8 and BF16 rows";
  }
}

ProfileModel::ProfileModel(const scenario::ProfileTable& table, const scenario::GpuSpec& gpu,
                           scenario::AttnImpl impl, std::shared_ptr<const GdnProfile> gdn,
                           std::shared_ptr<const GemmTable> gemm_table, const std::string& format)
    : path_(table.path), file_(path_.substr(path_.find_last_of('/') + 1)), fallback_(gpu, impl, std::move(gdn), std::move(gemm_table)),
      sms_(gpu.sm_count > 0 ? gpu.sm_count : 132) {
  struct Point {
    double flops, time_s;
    CostSource source;
  };
  std::map<CurveKey, std::vector<Point>> points;
  std::map<std::string, int> sources, gpus;
  for (const scenario::ProfileRow& row : table.rows) {
    if (row.fwdbwd) continue;  // a pair of kernels: validation only
    if (row_format(row.dtype) != format) continue;  // the other format's profile holds it
    AttentionCall call;
    call.q_len = row.q_len;
    call.kv_len = row.kv_len;
    call.mask = row.mask;
    call.unmasked_fraction = row.unmasked_fraction;
    call.heads_q = row.heads_q;
    call.heads_kv = row.heads_kv;
    call.head_dim = row.head_dim;
    call.backward = row.backward;
    const double flops = attention_flops(call);
    const CostSource src = row_source(row.source);
    // One CTA's FLOPs and one wave's time (the rows are timed on a GPU of this SM count: the
    // bundled profiles are matched to the GPU by name).
    const double per_cta = cta_flops(call, flops), wave_s = row.time_s / waves(call);
    // Several kernels may time one shape: a framework would pick the fastest.
    auto [it, inserted] = exact_.emplace(exact_key(call), std::make_pair(row.time_s, src));
    if (!inserted && row.time_s < it->second.first) it->second = {row.time_s, src};
    points[{row.backward, row.head_dim, mask_class(row.mask)}].push_back({per_cta, wave_s, src});
    ++rows_;
    ++sources[scenario::kRowSourceNames[static_cast<size_t>(row.source)]];
    ++gpus[row.gpu];
  }
  for (auto& [key, pts] : points) {
    std::sort(pts.begin(), pts.end(),
              [](const Point& a, const Point& b) { return a.flops < b.flops; });
    // Equal FLOPs: keep the fastest (the kernel a framework would pick), as for exact shapes.
    std::vector<Point> uniq;
    for (const Point& p : pts) {
      if (!uniq.empty() && std::fabs(p.flops - uniq.back().flops) <= 1e-9 * p.flops) {
        if (p.time_s < uniq.back().time_s) uniq.back().time_s = p.time_s;
        uniq.back().source = weaker(p.source, uniq.back().source);
        continue;
      }
      uniq.push_back(p);
    }
    // Pool adjacent violators on log(time) so the curve never decreases.
    struct Block {
      double sum_y, weight;
    };
    std::vector<Block> blocks;
    Curve curve;
    curve.source = uniq.front().source;
    for (const Point& p : uniq) {
      curve.source = weaker(curve.source, p.source);
      blocks.push_back({std::log(p.time_s), 1});
      while (blocks.size() > 1 && blocks[blocks.size() - 2].sum_y / blocks[blocks.size() - 2].weight >
                                      blocks.back().sum_y / blocks.back().weight) {
        const Block b = blocks.back();
        blocks.pop_back();
        blocks.back().sum_y += b.sum_y;
        blocks.back().weight += b.weight;
      }
    }
    size_t pi = 0;
    for (const Block& b : blocks) {
      for (int j = 0; j < static_cast<int>(b.weight); ++j, ++pi) {
        curve.log_flops.push_back(std::log(uniq[pi].flops));
        curve.log_time.push_back(b.sum_y / b.weight);
      }
    }
    curves_[key] = std::move(curve);
  }
  for (const auto& [s, n] : sources) source_names_ += (source_names_.empty() ? "" : "+") + s;
  for (const auto& [g, n] : gpus) gpus_ += (gpus_.empty() ? "" : "+") + g;
}

double ProfileModel::wave_time(const Curve& curve, double x, CostSource& source) {
  source = curve.source;
  if (x <= curve.log_flops.back() + kLogTolerance) return std::exp(interpolate(curve, x));
  // Past the longest measured CTA loop, the loop goes on at the last point's rate: the
  // published long-sequence rates have reached their plateau (FA3 d128 causal on H100: 602
  // TFLOP/s at 8K, 616 at 16K), and a longer loop adds tiles of the same kind. Computed from
  // the rows, so it says derived.
  source = CostSource::Derived;
  return std::exp(curve.log_time.back() + (x - curve.log_flops.back()));
}

Cost ProfileModel::attention(const AttentionCall& c) const {
  if (!c.backward) return priced(c);
  AttentionCall f = c;
  f.backward = false;
  return backward_at_forward_rate(priced(c), priced(f));
}

Cost ProfileModel::priced(const AttentionCall& c) const {
  const double flops = attention_flops(c);
  if (!(flops > 0)) return fallback_.attention(c);
  if (c.batch == 1) {
    const auto it = exact_.find(exact_key(c));
    if (it != exact_.end()) return Cost{it->second.first, flops, it->second.second, false, file_.c_str()};
  }
  const Curve* curve = find_curve(c.backward, c.head_dim, mask_class(c.mask));
  if (curve == nullptr && c.mask == scenario::Mask::Document) {
    curve = find_curve(c.backward, c.head_dim, 1);
  }
  const double n_waves = waves(c);
  const double x = std::log(cta_flops(c, flops));
  CostSource source;
  if (curve != nullptr && x >= curve->log_flops.front() - kLogTolerance) {
    const double t = wave_time(*curve, x, source);
    return Cost{t * n_waves, flops, source, false, file_.c_str()};
  }
  // No curve for this mask class: the dense curve at the FLOPs of the dense call that runs as
  // many tile-equivalents (tile_cost.hpp): partial tiles computed whole, masked-kernel rate.
  if (c.mask != scenario::Mask::Full && curve == nullptr) {
    if (const Curve* dense = find_curve(c.backward, c.head_dim, 0)) {
      const TileShape tile = tile_shape(fallback_.impl(), c.head_dim, c.backward, true);
      AttentionCall full = c;
      full.mask = scenario::Mask::Full;
      full.unmasked_fraction = 1;
      const double ratio = tile_equivalents(c, tile) /
                           tile_equivalents(full, tile_shape(fallback_.impl(), c.head_dim, c.backward, false));
      const double xe = std::log(cta_flops(c, attention_flops(full) * ratio));
      if (xe >= dense->log_flops.front() - kLogTolerance) {
        const double t = wave_time(*dense, xe, source);
        return Cost{t * n_waves, flops, source, false, file_.c_str()};
      }
    }
  }
  Cost r = fallback_.attention(c);
  r.extrapolated = true;
  r.origin = "tile model: no measured or published row for the shape, -v lists them";
  if (log::enabled(log::Level::Info)) {
    char rule[200] = "the profile has no curve for this direction, head dim and mask (docs/kernels.md "
                     "lists the published figures per GPU and head dim)";
    if (curve != nullptr)
      std::snprintf(rule, sizeof rule, "%.3g FLOP, outside the curve's %.3g-%.3g FLOP", flops,
                    std::exp(curve->log_flops.front()), std::exp(curve->log_flops.back()));
    log_extrapolated(c, rule, path_);
  }
  return r;
}

std::optional<CostModel::Fp8Ratio> ProfileModel::fp8_attention_ratio(const AttentionCall& c) const {
  if (!fp8_) return std::nullopt;
  const Cost f = fp8_->attention(c), b = attention(c);
  if (f.extrapolated || b.extrapolated || !(f.time_s > 0) || !(b.time_s > 0)) return std::nullopt;
  return Fp8Ratio{b.time_s / f.time_s, fp8_origin_.c_str()};
}

std::string ProfileModel::describe() const {
  std::string classes;
  for (const auto& [key, curve] : curves_) {
    const auto& [bwd, d, cls] = key;
    static const char* const kClass[] = {"full", "causal", "document"};
    char buf[192];
    std::snprintf(buf, sizeof buf, "%s%s d%d %s %.3g-%.3g FLOP (%s)", classes.empty() ? "" : "; ",
                  bwd ? "bwd" : "fwd", d, kClass[cls], std::exp(curve.log_flops.front()),
                  std::exp(curve.log_flops.back()), cost_source_name(curve.source));
    classes += buf;
  }
  return "profile " + path_ + " (" + std::to_string(rows_) + " BF16 rows" +
         (fp8_ ? " and " + std::to_string(fp8_->rows_) + " FP8 rows, read for FP8 attention's ratio" : std::string()) +
         ", " + source_names_ +
         ", gpu " + gpus_ + "; attention interpolated in log-log between measured FLOPs per " +
         "direction / head dim / mask class (one wave's time against one CTA's FLOPs, times the call's waves over " +
         std::to_string(sms_) + " SMs): " + classes + "); outside that range and for " +
         "other kernels: " + fallback_.describe();
}

}  // namespace cpsim::model
