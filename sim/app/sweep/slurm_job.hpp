#pragma once
/// `cpsim sweep --slurm`: submits the sweep's K shards as one Slurm array job, optionally
/// waits for it, then merges. sbatch and squeue run on `runner`; `clock` paces the waiting.
#include "app/process_pool.hpp"
#include "app/sweep/common.hpp"

namespace cpsim::app::sweep {

int run_slurm(const SweepArgs& a, const scenario::Sweep& sweep, pool::Runner& runner, pool::Clock& clock);

}  // namespace cpsim::app::sweep
