#pragma once
/// `cpsim sweep --slurm`: submits the sweep's K shards as one Slurm array job, optionally
/// waits for it, then merges.
#include "app/sweep/common.hpp"

namespace cpsim::app::sweep {

int run_slurm(const SweepArgs& a, const scenario::Sweep& sweep);

}  // namespace cpsim::app::sweep
