#pragma once
/// Fleet noise on priced compute ops, applied when a graph is replayed rather than baked into
/// it: a rank's static factor (slow_gpus x slow_nodes x gpu_variation) times a per-kernel
/// jitter draw. The draw is a pure function of (seed, op id), not of build order, so one graph
/// serves every seed of `--samples` and every rank of the straggler what-if (children replay the
/// parent's graph with another ComputeNoise instead of building their own), and sparing a rank
/// (the what-if's neutral rank) leaves every other op's draw as it was.
#include <cstdint>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::schedule {

class ComputeNoise {
 public:
  ComputeNoise() = default;  ///< none: every priced op runs at its nominal time
  /// The noise `sc` asks for on a platform of `num_ranks` GPUs: static factors drawn from
  /// simulation.seed in GPU order, jitter keyed by simulation.seed, perturb.neutral_rank spared.
  ComputeNoise(const scenario::Scenario& sc, int num_ranks);

  /// The same draws with `rank` at nominal speed (no slowdown, variation or jitter).
  ComputeNoise with_neutral(int rank) const;

  /// Static factor of a rank (1 = nominal).
  double rank_factor(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < factor_.size() ? factor_[static_cast<size_t>(rank)] : 1.0;
  }
  /// What a priced op's nominal time is multiplied by on `rank`: its factor times its jitter.
  double scale(uint32_t op_id, int rank) const {
    if (rank == neutral_) return 1.0;
    const double f = rank_factor(rank);
    return jitter_cv_ > 0 ? f * jitter(op_id) : f;
  }
  /// The jitter draw of op `op_id` (mean 1); 1 without jitter.
  double jitter(uint32_t op_id) const;
  bool any() const { return jitter_cv_ > 0 || !factor_.empty(); }

 private:
  std::vector<double> factor_;  ///< empty: every rank nominal
  double jitter_cv_ = 0;
  bool lognormal_ = false;
  double log_mu_ = 0, log_sigma_ = 0;  ///< lognormal jitter: mean 1, cv jitter_cv_
  int neutral_ = -1;
  uint64_t key_ = 0;  ///< the jitter stream's key, from the seed
};

}  // namespace cpsim::schedule
