#pragma once
/// From a replayed trace to the figures users plan with: step time, throughput, per-rank
/// compute / communication / idle, exposed communication and overlap, waits attributed to the
/// op and rank that released them, the critical path, memory. No SimGrid.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/topology.hpp"
#include "model/memory.hpp"
#include "model/transformer.hpp"
#include "report/comm_split.hpp"
#include "scenario/specs.hpp"
#include "schedule/plan.hpp"
#include "schedule/task_graph.hpp"
#include "schedule/trace.hpp"

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
  /// Time the rank computed nothing: every such stretch waited for the op that released the
  /// compute op after it (the stretch after its last compute, for the op ending the step).
  /// compute_s + wait_s = step time.
  double wait_s = 0;
  /// wait_s by the rank whose op released it; a transfer counts for its other end as seen
  /// from this rank (the sender for a receive, the receiver for a send)
  std::map<int, double> waited_on;
  /// The kind of op (phase, scheme, name, ranks; all layers and steps together) whose
  /// completion released the most of the rank's waits.
  struct Releaser {
    std::string op;   ///< "fwd ring-zigzag kv_p2p [r2->r3]"
    int rank = -1;    ///< the releasing op's rank (a transfer's sender)
    double wait_s = 0;
    std::string what;  ///< op without its ranks: "fwd ring-zigzag kv_p2p"
    /// The longest single wait it released, and where: the releasing op's layer,
    /// micro-batch and step (a ring's or a collective algorithm's), -1 where it has none.
    double longest_s = 0;
    int layer = -1, micro = -1, step = -1;
  } top_releaser;
  /// The kinds that released the most of the rank's waits, most first (top_releaser is the
  /// first), at most kTopReleasers.
  static constexpr size_t kTopReleasers = 3;
  std::vector<Releaser> top_releasers;
};

/// One line of the summary's top waits: a rank's waits on one kind of op, the largest of
/// every rank's on that kind (phase, scheme, name), with how many other ranks wait on it too.
struct TopWait {
  int rank = -1;                   ///< the rank that waited
  RankMetrics::Releaser releaser;  ///< what it waited for, how long in all, the longest once
  int other_ranks = 0;             ///< other ranks with waits on the same kind
  double others_min_s = 0, others_max_s = 0;  ///< their totals' range
};
/// The `n` kinds of op that ranks waited on longest (RankMetrics::top_releasers of the ranks
/// that compute, grouped by Releaser::what), each with the rank that waited most on it; by that
/// wait, most first, ties by the lower rank, then the op's description: the same on every run.
std::vector<TopWait> top_waits(const std::vector<RankMetrics>& ranks, size_t n = 5);

/// Load of one directed link over the replayed graph.
struct LinkLoad {
  std::string name;         ///< "n0.gpu3.nvlink.up"
  std::string cls;          ///< "nvlink", "nic", ...
  double bytes = 0;         ///< bytes of every transfer whose route crosses it
  double bw_Bps = 0;        ///< its effective bandwidth (perturbations applied)
  double busy_s = 0;        ///< bytes / bw_Bps: the time it must carry data
  double utilisation = 0;   ///< busy_s / step time
};

/// What-if for the straggler: the step re-simulated with one rank's perturbation removed.
struct StragglerWhatIf {
  int rank = -1;               ///< the rank whose removal shrinks the step most
  double factor = 1;           ///< its static slowdown (slow_gpus x slow_nodes x variation)
  double step_with_s = 0;
  double step_without_s = 0;
  double shrink_s = 0;         ///< step_with_s - step_without_s
  struct Try {
    int rank;
    double factor;
    double step_without_s;
  };
  std::vector<Try> tried;      ///< every candidate simulated, in the order tried
  std::string removed;         ///< what removing a rank's perturbation means here
};

/// What-if for the scenario's perturbations: the step simulated without each one
/// (scenario::perturb_items, at most a cap of them), and without all of them together.
struct PerturbWhatIf {
  double step_with_s = 0;
  struct Try {
    std::string kind;            ///< scenario::PerturbItem::kind
    std::string label;           ///< "rail 0 down on every node"
    double step_without_s = -1;  ///< < 0 when the run without it failed (error says why)
    std::string error;
  };
  std::vector<Try> tried;        ///< in scenario::perturb_items' order
  std::optional<Try> all;        ///< every perturbation removed, when there is more than one
  int perturbations = 0;         ///< how many the scenario has (tried.size() < this when capped)
};

/// Step-time distribution over seeds.
struct Samples {
  std::vector<uint64_t> seeds;
  std::vector<double> step_time_s;
  double mean_s = 0, stdev_s = 0, min_s = 0, max_s = 0, p50_s = 0, p95_s = 0, p99_s = 0;
};
/// Fills the statistics of `s` from s.step_time_s (percentiles by linear interpolation between
/// order statistics, as numpy's default; stdev is the sample standard deviation).
void sample_stats(Samples& s);

struct CriticalPath {
  double length_s = 0;
  std::map<std::string, double> by_category;  ///< seconds on the path per op category
  std::map<int, double> compute_by_rank;      ///< compute seconds on the path per rank
  std::vector<uint32_t> ops;                  ///< from first to last
  /// The path's last kLastOps ops, described (TaskGraph::describe), so that outputs written
  /// after the graph is released (simulate.cpp, before child replays) can still name them.
  static constexpr size_t kLastOps = 200;
  std::vector<std::string> last_described;
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
  /// mean per rank of compute time by the layer type the op belongs to ("full-attention",
  /// "linear-attention", "other" for embedding, LM head, optimizer)
  std::map<std::string, double> compute_by_layer_kind;
  CriticalPath critical_path;
  model::MemoryEstimate memory;  ///< the rank class with the largest peak (model/memory.hpp)
  /// Total and exposed communication and bytes per parallelism kind (tp, cp, pp, dp, ep).
  std::map<std::string, CommKind> communication;
  std::map<std::string, std::map<std::string, long>> pricing;  ///< op kind -> source -> ops
  /// op kind -> source -> nominal seconds of the ops it priced
  std::map<std::string, std::map<std::string, double>> pricing_time_s;
  long extrapolated_ops = 0;
  std::vector<std::pair<std::string, double>> bytes_per_link_class;
  size_t ops = 0;
  double sim_wall_s = 0;
  std::string symmetry;         ///< whether one DP replica stood for all, or why not
  int replicas_copied = 0;      ///< DP replicas added as copies of the first one's ops
  std::string why_not_copied;   ///< why none were, when several replicas were built
  int straggler_rank = -1;      ///< rank with the most compute on the critical path beyond its share
  std::vector<LinkLoad> links;  ///< the most utilised links, most first (see link_loads)
  std::optional<StragglerWhatIf> straggler;  ///< when the what-if ran
  std::optional<PerturbWhatIf> perturbations;  ///< when the perturbation what-if ran
  std::optional<Samples> samples;            ///< when several seeds ran
};

/// What the report reads of the graph alone (each rank's ops, the transfers' kinds and bytes,
/// the links' loads), so that a caller can build it beside the replay on another core: on the
/// 70B full replay (24.3 M ops) it is 0.55 s of one core the replay leaves idle.
class GraphPart {
 public:
  GraphPart(const schedule::TaskGraph& g, const model::Topology& topo, size_t top_links = 16,
            unsigned threads = 0);
  ~GraphPart();
  GraphPart(GraphPart&&) noexcept;
  GraphPart& operator=(GraphPart&&) noexcept;
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

/// Every figure of a replayed plan, from the products only: the plan (graph, build info,
/// pricing), the engine's trace, the topology (routes, for link loads) and the memory estimate.
/// The critical path and the link loads (the `top_links` most utilised, and the bytes per link
/// class) are computed here, once. The per-rank parts run on `threads` threads (0: the
/// machine's cores, up to 4, for chunks of ranks large enough to pay for them); the result is
/// the same to the bit for any number.
Result analyze(const schedule::Plan& plan, const schedule::Trace& trace,
               const model::Topology& topo, const model::MemoryEstimate& memory,
               size_t top_links = 16, unsigned threads = 0);
/// The same, with the graph's part built already (from plan.graph, before or beside the replay).
Result analyze(const schedule::Plan& plan, const schedule::Trace& trace, const model::MemoryEstimate& memory,
               GraphPart part, unsigned threads = 0);

}  // namespace cpsim::report
