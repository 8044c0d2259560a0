#pragma once
/// The changes that make an out-of-memory scenario fit: candidate edits written as the `--set`
/// overrides a user would type, each applied by re-loading the scenario (so the loader validates
/// it like any input) and re-evaluating the memory model (model/memory.hpp). Shared by
/// `cpsim memory` and the OOM hint of `cpsim run`.
#include <string>
#include <vector>

#include "model/memory.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app {

struct MemoryChange {
  std::string what;                  ///< "ZeRO stage 3", "CP 8 -> 16 (2 nodes)"
  std::vector<std::string> sets;     ///< the overrides, "parallel.zero_stage=3"
  model::MemoryEstimate memory;      ///< peak rank class with the change applied
  int gpus = 0;                      ///< GPUs the changed scenario uses (tp*cp*pp*dp)
  double step_time_s = -1;           ///< filled by the caller when it simulates (-1 = not run)
  double sequences_per_step = 1;     ///< dp x micro_batch x micro_batches of the changed scenario
};

/// Candidate single changes for `sc` (those that can lower a term): higher ZeRO stages, full
/// recomputation, sequence parallelism, micro-batch 1, chunked loss (kept only if the loader
/// knows the key), doubling CP, TP or PP (with the nodes that needs). When `combine` and no
/// single change fits, also the pairs of changes to two different keys (never two ZeRO stages).
/// Each is re-loaded from `path` with `base_sets` plus its own; ones the loader rejects are
/// dropped, and so are those that save no memory (under 0.05 GB, what the tables print as 0.0)
/// and pairs that save no more than one of their halves alone. Returned fitting ones first,
/// then by GPUs, then by peak memory; deterministic.
std::vector<MemoryChange> memory_changes(const std::string& path,
                                         const std::vector<std::string>& base_sets,
                                         const scenario::Scenario& sc, bool combine = true);

/// The smallest mesh on which the scenario's model fits (found = false when none within the
/// search's bound): the fewest GPUs, in whole nodes, for which some TP x CP x PP x DP (TP inside
/// a node), ZeRO stage (the scenario's or higher) and recomputation (the scenario's or full)
/// leaves model::kTightHeadroom of the GPU's memory free. Of the fitting layouts at that size
/// the one with the lowest ZeRO stage, then the scenario's recomputation, then the widest TP,
/// the fewest pipeline stages and the smallest CP. Re-loaded from `path` like any input, so the
/// layout is one `cpsim run` accepts. Memory model only: `cpsim plan --gpus N` ranks by speed.
struct MeshFit {
  bool found = false;
  int gpus = 0, nodes = 0;
  int tp = 1, cp = 1, pp = 1, dp = 1, zero_stage = 0;
  scenario::Recompute recompute = scenario::Recompute::None;
  std::vector<std::string> sets;  ///< the overrides that select it
  model::MemoryEstimate memory;
  int largest_gpus_tried = 0;     ///< the bound when none was found
};
MeshFit smallest_fitting_mesh(const std::string& path, const std::vector<std::string>& base_sets,
                              const scenario::Scenario& sc);

/// "--set a=1 --set b=2", each setting shell-quoted.
std::string sets_text(const std::vector<std::string>& sets);
/// "cpsim run PATH --set ...": a line to paste into a shell, every word quoted for it.
std::string run_line(const std::string& scenario_path, const std::vector<std::string>& sets);

}  // namespace cpsim::app
