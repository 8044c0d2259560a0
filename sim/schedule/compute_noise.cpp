#include "schedule/compute_noise.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace cpsim::schedule {

namespace {
constexpr double kTwoPi = 6.283185307179586;

/// Standard normal from two uniforms (Box-Muller), written out so that the same seed gives the
/// same numbers with every standard library.
double normal(std::mt19937_64& rng) {
  const double u1 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ULL;

/// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014; passes BigCrush): its n-th output from seed s is mix(s + n * gamma), a pure function
/// of (s, n), so op k's draws need no sequential stream and no build order.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double unit(uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }
}  // namespace

ComputeNoise::ComputeNoise(const scenario::Scenario& sc, int num_ranks)
    : jitter_cv_(sc.perturb.jitter_cv),
      lognormal_(sc.perturb.jitter_dist == scenario::JitterDist::LogNormal),
      neutral_(sc.perturb.neutral_rank), key_(mix(sc.simulation.seed + kGamma)) {
  if (lognormal_) {
    log_sigma_ = std::sqrt(std::log1p(jitter_cv_ * jitter_cv_));
    log_mu_ = -0.5 * log_sigma_ * log_sigma_;
  }
  const auto& pe = sc.perturb;
  const bool slowed = std::any_of(pe.gpu_slowdown.begin(), pe.gpu_slowdown.end(),
                                  [](const auto& kv) { return kv.second != 1; });
  if (pe.gpu_variation_cv <= 0 && !slowed) return;
  factor_.assign(static_cast<size_t>(num_ranks), 1.0);
  if (pe.gpu_variation_cv > 0) {
    std::mt19937_64 static_rng(sc.simulation.seed ^ 0x9e3779b97f4a7c15ULL);
    for (auto& f : factor_) f *= std::max(0.5, 1.0 + pe.gpu_variation_cv * normal(static_rng));
  }
  for (const auto& [rank, slow] : pe.gpu_slowdown)
    if (rank >= 0 && rank < num_ranks) factor_[static_cast<size_t>(rank)] *= slow;
  if (neutral_ >= 0 && neutral_ < num_ranks) factor_[static_cast<size_t>(neutral_)] = 1.0;
}

ComputeNoise ComputeNoise::with_neutral(int rank) const {
  ComputeNoise n = *this;
  n.neutral_ = rank;
  if (rank >= 0 && static_cast<size_t>(rank) < n.factor_.size()) n.factor_[static_cast<size_t>(rank)] = 1.0;
  return n;
}

double ComputeNoise::jitter(uint32_t op_id) const {
  if (!(jitter_cv_ > 0)) return 1.0;
  const uint64_t n = 2 * static_cast<uint64_t>(op_id) + 1;  // outputs n and n + 1 of the key's stream
  const double u1 = unit(mix(key_ + n * kGamma)), u2 = unit(mix(key_ + (n + 1) * kGamma));
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
  return lognormal_ ? std::exp(log_mu_ + log_sigma_ * z) : std::max(0.5, 1.0 + jitter_cv_ * z);
}

}  // namespace cpsim::schedule
