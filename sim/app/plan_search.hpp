#pragma once
/// `cpsim plan`'s search: which TP x CP x PP x DP layout, virtual stages, attention scheme (with
/// its USP degree or double-ring inner size), token layout, recomputation and ZeRO stage trains
/// fastest on N GPUs. The command (cmd_plan.cpp) only prints; the enumeration and the pruning
/// live here, cheapest first:
///   1. divisibility: every structure is loaded through the scenario loader with its --set
///      overrides (so "invalid" means what `cpsim run` would reject);
///   2. memory: model/memory.hpp per (recompute, ZeRO) pair; of the fitting pairs only the
///      minimal ones survive (less recomputation and less sharding are never slower);
///   3. attention scheme: one attention layer per (TP, CP, scheme, layout) with the analytic
///      engine; the best two per (TP, CP) survive (the scheme changes only attention layers);
///   4. step: the survivors' whole steps with the analytic engine, in -j long-lived worker
///      processes that reuse their heap from one layout to the next (app/simulate.hpp StepWorkers),
///      in the order of a lower bound per token (FLOPs at peak, or where larger the compute
///      stream's priced kernels and the waits TP collectives force on them, plus the LM head:
///      app/layer_probe.hpp step_lower_bound), at most `budget` of them; once
///      that bound is no better than the best simulated step, the rest cannot win ("bounded");
///   5. the best `verify` whose SimGrid graph fits --max-memory re-simulated with SimGrid
///      (contention), which ranks them: the verified first, then the others by analytic time.
/// The children running at once share `max_memory_bytes` (default: app::default_plan_memory(),
/// one child at most app::default_max_memory()): a stage 4 child holds stage 4's
/// estimate of its graph (one layer's ops x layers x micro-batches x replicas built) and its
/// error, a stage 5 child an equal share and probes itself first (app/work_limit.hpp); they
/// start while what they hold fits, largest first. One stopped at what it holds runs again
/// alone, and one over the whole is not simulated ("too_big") instead of meeting the kernel's
/// OOM killer; a layout estimated over kEstimateMargin x the whole is "too_big" without a child.
/// Throughput (tokens/s) ranks the layouts, since DP and micro-batches change the tokens per
/// step. Deterministic: fixed enumeration order, ties broken by the label.
#include <cstdint>
#include <string>
#include <vector>

#include "app/progress.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app::plan {

struct Candidate {
  int tp = 1, cp = 1, pp = 1, dp = 1, vstages = 1, micro_batches = 1;
  scenario::AttentionScheme scheme = scenario::AttentionScheme::Ring;
  scenario::Layout layout = scenario::Layout::ZigZag;
  int ulysses_degree = 0, inner_ring = 0;
  scenario::Recompute recompute = scenario::Recompute::Full;
  int zero_stage = 1;
  /// Values of the axes searched beyond the layout (Result::axes order), e.g. {"on", "fp8-delayed",
  /// "megatron-te"}; empty when none was searched.
  std::vector<std::string> axis_values;
  size_t variant_of = SIZE_MAX;   ///< for an axis variant (plan_axes.hpp): its layout's index in all
  std::vector<std::string> sets;  ///< overrides that reproduce it with `cpsim run`
  std::string label;              ///< "tp1 cp8 pp2 dp1 v1 m8 ring-zigzag rc=full z3"
  /// "ranked", "invalid", "oom", "dominated", "screened", "bounded", "budget", "too_big", "failed"
  std::string status;
  std::string why;                ///< one line: why it lost
  double peak_bytes = 0;
  double attention_layer_s = -1;  ///< stage 3
  /// Stage 4's lower bound x (1 + bubble): the larger of FLOPs / peak x recompute and the
  /// compute stream's priced work (app/layer_probe.hpp probe_layer).
  double estimate_s = 0;
  double analytic_s = -1;         ///< stage 4
  double simgrid_s = -1;          ///< stage 5
  /// Wall seconds of its stage 4 and stage 5 children (probe, build, replay; -1: not run), so
  /// `--json` shows where a search's time went.
  double analytic_wall_s = -1, simgrid_wall_s = -1;
  double analytic_start_s = -1, simgrid_start_s = -1;  ///< their starts, seconds into the search
  double tokens_per_step = 0;
  double model_flops = 0;         ///< per step
  double tokens_per_s() const;    ///< from the SimGrid time when run, else the analytic one
  double step_s() const { return simgrid_s > 0 ? simgrid_s : analytic_s; }
};

struct Options {
  int gpus = 0;          ///< GPUs to fill exactly (tp*cp*pp*dp)
  int jobs = 2;          ///< child processes at once
  int budget = 48;       ///< whole-step analytic simulations at most
  int verify = 3;        ///< best ones re-simulated with SimGrid (0 = none)
  int schemes_kept = 2;  ///< schemes per (TP, CP) after the attention-layer screen
  /// > 0: sequences per step held fixed (dp x micro_batch x micro_batches); 0: micro-batches
  /// 4 x pp per DP replica (1 without PP), and throughput decides.
  int global_batch = 0;
  /// Per-GPU memory a layout may use: > 0 bytes, else memory_budget_fraction of the GPU's
  /// memory (default 1 - model::kTightHeadroom: a tight fit is not a fit to plan on).
  double memory_budget_bytes = 0;
  double memory_budget_fraction = 0.95;
  /// This machine's memory for the simulations: the children running at once share it; one
  /// over its share runs alone, one over all of it is "too_big". 0: app::default_plan_memory()
  /// for the children at once, app::default_max_memory() for one.
  double max_memory_bytes = 0;
  /// Where the search says which stage it is in and how far (stderr; may be null).
  Progress* progress = nullptr;
};

struct Result {
  std::vector<Candidate> all;      ///< every candidate, enumeration order
  std::vector<size_t> ranked;      ///< indices into all: verified (by SimGrid) first, then analytic
  int nodes = 0;                   ///< the platform nodes the search used
  double memory_budget_bytes = 0;  ///< per GPU, what "oom" was measured against
  /// The axes searched beyond the layout ("tp_comm_overlap", "precision", "stack"): the
  /// scenario keys it does not pin, on the best layouts (plan_axes.hpp); and why the others
  /// were not ("training.stack: set by the scenario").
  std::vector<std::string> axes;
  std::vector<std::string> axes_not_searched;
  int structures = 0;              ///< layouts loaded through the loader
  int attention_runs = 0, step_runs = 0, simgrid_runs = 0;
  int compute_probes = 0;  ///< stage 4's layer builds for the compute bound and graph size (probe_layer)
  /// Wall seconds of each stage: the enumeration and memory (1-2), the attention layers (3),
  /// the analytic steps (4), SimGrid (5). Where a search's time goes, for `--json` and the table.
  double stage_wall_s[4] = {0, 0, 0, 0};
};

/// The per-GPU memory budget of `opt` on a GPU of `capacity_bytes`.
double memory_budget(const Options& opt, double capacity_bytes);

/// Throws std::invalid_argument for impossible options (gpus not a multiple that the platform
/// can hold, ...) and scenario::InputError when the scenario itself does not load.
Result search(const std::string& path, const std::vector<std::string>& sets, const Options& opt);

}  // namespace cpsim::app::plan
