#pragma once
/// From a replayed trace to the figures users plan with: step time, throughput, per-rank
/// compute / communication / idle, exposed communication and overlap, waits attributed to the
/// op and rank that released them, the critical path, memory. No SimGrid.
#include <map>
#include <string>
#include <vector>

#include "engine/trace.hpp"
#include "model/transformer.hpp"
#include "scenario/specs.hpp"
#include "schedule/step.hpp"
#include "schedule/task_graph.hpp"

namespace cpsim::report {

struct RankMetrics {
  int rank = 0;
  double compute_s = 0;        ///< union of compute ops
  double comm_s = 0;           ///< union of transfers the rank sends or receives
  double exposed_comm_s = 0;   ///< communication in flight while the GPU computes nothing
  double idle_s = 0;           ///< neither computing nor communicating
  double attention_compute_s = 0;
  double cp_comm_s = 0;        ///< context-parallel transfers (cp streams)
  double cp_exposed_s = 0;
  double bytes_sent = 0;
  double bytes_received = 0;
  /// seconds this rank's ops waited, by the rank whose op released them (self included)
  std::map<int, double> waited_on;
};

struct CriticalPath {
  double length_s = 0;
  std::map<std::string, double> by_category;  ///< seconds on the path per op category
  std::map<int, double> compute_by_rank;      ///< compute seconds on the path per rank
  std::vector<uint32_t> ops;                  ///< from first to last
};

struct Result {
  std::string name;
  std::string engine;
  std::string scope;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  int gpus = 0;
  std::vector<RankMetrics> ranks;
  // means over ranks
  double compute_s = 0, exposed_comm_s = 0, idle_s = 0;
  double bubble_ratio = 0;      ///< idle / compute: the pipeline bubble as Megatron states it
  struct Attention {
    double exposed_comm_s = 0;
    double overlap_fraction = 0;
    double imbalance = 1;       ///< max / mean attention compute over ranks
    double comm_s = 0;
    double compute_s = 0;
    double bytes_sent_per_rank = 0;
  } attention;
  std::map<std::string, double> time_by_category;  ///< mean per rank of op time by category
  std::map<std::string, double> time_by_op;        ///< mean per rank of op time by op name
  CriticalPath critical_path;
  model::MemoryEstimate memory;
  std::map<std::string, std::map<std::string, long>> pricing;  ///< op kind -> source -> ops
  long extrapolated_ops = 0;
  std::vector<std::pair<std::string, double>> bytes_per_link_class;
  size_t ops = 0;
  double sim_wall_s = 0;
  int straggler_rank = -1;      ///< rank with the most compute on the critical path beyond its share
};

Result analyze(const scenario::Scenario& sc, const schedule::TaskGraph& g,
               const engine::Trace& trace, const schedule::BuildInfo& info,
               const schedule::Pricer& pricer);

}  // namespace cpsim::report
