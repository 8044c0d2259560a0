#pragma once
/// The task graph every schedule builder produces and every engine replays: ops (op.hpp)
/// with happens-before edges. Ops on one (rank, stream) run in insertion order, as kernels on
/// a CUDA stream do. A transfer occupies its sender's stream and its receiver's stream and
/// starts only when both have reached it and all its predecessors are done (NCCL send/recv
/// semantics).
///
/// Where it is written: storage and building in task_graph.cpp, copied replicas (copy_ops) in
/// task_graph_copy.cpp and the inline walks through them in task_graph_copies.hpp, edges and
/// queues in task_graph_links.cpp, text and DOT output in task_graph_dot.cpp.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "schedule/compute_noise.hpp"
#include "schedule/op.hpp"
#include "support/chunked_vector.hpp"

namespace cpsim::schedule {

namespace detail {
struct CollectiveMemo;  // collective_parts.hpp
}

/// A lockstep collective's lanes as a lean build keeps them (schedule/lean_lanes.cpp): per
/// lane, the ring positions whose transfers are built and their sharers.
struct LeanLanes {
  std::vector<std::vector<uint32_t>> kept;
  std::vector<std::vector<float>> sharers;
};

/// A lean build's phantom GPUs (TaskGraph::set_phantom_ranks) and what the collectives built so
/// far did with each (schedule/lean_lanes.cpp).
struct Phantoms {
  enum State : uint8_t { kReal, kUnseen, kKept, kDropped };
  /// Per GPU. kKept: every op it had in the full graph was built; kDropped: some were left out,
  /// as another phantom of the same history stands for it.
  std::vector<uint8_t> state;
  /// Per GPU: the built GPU it stands in for (its twin in the representative replica), or -1.
  std::vector<int32_t> twin;
  /// Per GPU: phantoms of equal history had the same ops at the same times so far (0: none).
  std::vector<uint32_t> history;
  uint32_t histories = 0;  ///< history ids handed out
  std::unordered_map<std::string, LeanLanes> lanes;  ///< multi-rail lanes worked out, by collective
};

/// Append-only DAG. Call finalize() once after building; engines require it.
class TaskGraph {
 public:
  /// At most `max_ops` ops (0 = no limit), a copied op (copy_ops) counting for
  /// `copied_weight` of a stored one (it costs less memory): add() or copy_ops() past it throws
  /// OpLimitExceeded.
  void set_op_limit(size_t max_ops, double copied_weight = 1.0) {
    op_limit_ = max_ops;
    copied_weight_ = copied_weight;
  }
  OpId add(const Op& op);
  OpId add_compute(int rank, uint16_t stream, double duration_s, const OpLabel& label,
                   double flops = 0);
  /// A compute op priced by the cost model: `nominal_s` on a nominal GPU, to which the replay
  /// applies the rank's factor and the op's jitter (noise()).
  OpId add_priced(int rank, uint16_t stream, double nominal_s, const OpLabel& label, double flops = 0);
  OpId add_transfer(int src, uint16_t src_stream, int dst, uint16_t dst_stream, double bytes,
                    const OpLabel& label, double max_rate_Bps = 0, double extra_latency_s = 0,
                    bool unordered = false);
  /// `before` must finish before `after` starts. Ignores kNoOp on either side.
  void add_edge(OpId before, OpId after);
  /// Appends a copy of ops [first, last) on ranks shifted by `rank_offset`, and of the edges
  /// [edge_first, edge_last), which must be every edge added so far between ops of that range.
  /// Returns the copy of `first` (copy of op i = i + returned - first). Throws std::logic_error
  /// if an edge leaves the range or one inside it is not in the edge range. How one
  /// data-parallel replica becomes the next (step.cpp). The copies are not stored: op() reads
  /// the original and shifts its ranks, and after finalize its edges and queue links are the
  /// original's shifted (task_graph_links.cpp). They cannot be changed (op_mut throws).
  OpId copy_ops(OpId first, OpId last, size_t edge_first, size_t edge_last, int rank_offset);

  /// Makes the transfers [first, last) one Pipeline if they can move in lockstep: two or more
  /// unordered transfers (a collective's fenced ones: they wait only for the collective's
  /// join, never for each other) between distinct GPUs, of equal bytes, uncapped, after every
  /// pipeline so far. Returns false (and leaves them independent) otherwise.
  bool add_pipeline(OpId first, OpId last);
  const std::vector<Pipeline>& pipelines() const { return pipelines_; }
  /// Index into pipelines() of the one holding op `id`, or UINT32_MAX.
  uint32_t pipeline_of(OpId id) const;

  uint32_t intern(std::string_view s);
  /// The id `s` was interned as, or UINT32_MAX if it never was.
  uint32_t interned(std::string_view s) const;
  const std::string& str(uint32_t id) const { return strings_[id]; }
  size_t num_strings() const { return strings_.size(); }
  int32_t add_shape(const KernelShape& s);
  const std::vector<KernelShape>& shapes() const { return shapes_; }

  /// Builds adjacency and per-(rank, stream) queues. Throws std::logic_error on a cycle (the
  /// order itself is not kept: no stage reads it, and it was 4 bytes per op).
  void finalize();
  bool finalized() const { return finalized_; }

  size_t size() const { return size_; }
  /// Op `id`, by value: a copied op (copy_ops) is its original on shifted ranks.
  Op op(OpId id) const {
    if (copies_.empty() || id < copies_.front().base) return ops_[id];
    return copied_op(id);
  }
  /// Op `id` without a copy: the stored op it is (a copy's original), whose ranks are id's
  /// less `shift` (set here). For an engine's hot path, where an op is read once per start:
  /// copying copied ops there was ~4 % of the 70B full replay's samples.
  const Op& stored_op(OpId id, int32_t& shift) const;
  /// A stored op, to change while building; throws std::logic_error for a copied one.
  Op& op_mut(OpId id);
  /// Every op in id order, by value (`for (const Op& op : g.ops())`).
  class OpsView {
   public:
    class Iter {
     public:
      using iterator_category = std::input_iterator_tag;
      using value_type = Op;
      using difference_type = std::ptrdiff_t;
      using pointer = void;
      using reference = Op;
      Iter(const TaskGraph* g, OpId i) : g_(g), i_(i) {}
      Op operator*() const { return g_->op(i_); }
      Iter& operator++() {
        ++i_;
        return *this;
      }
      bool operator!=(const Iter& o) const { return i_ != o.i_; }
      bool operator==(const Iter& o) const { return i_ == o.i_; }

     private:
      const TaskGraph* g_;
      OpId i_;
    };
    explicit OpsView(const TaskGraph* g) : g_(g) {}
    Iter begin() const { return {g_, 0}; }
    Iter end() const { return {g_, static_cast<OpId>(g_->size())}; }
    size_t size() const { return g_->size(); }
    Op operator[](size_t i) const { return g_->op(static_cast<OpId>(i)); }

   private:
    const TaskGraph* g_;
  };
  OpsView ops() const { return OpsView(this); }
  /// Calls f(id, op) for every op in id order: op() without a search per copied op, and a
  /// copied range read in its original's order (the report's passes over 24 M ops).
  template <class F>
  void for_each_op(F&& f) const { for_each_op_in(0, static_cast<OpId>(size_), f); }
  /// The same for ops [lo, hi) only, so that passes over the ops can split them across threads;
  /// with [r0, r1), copied ranges none of whose ops has its rank or peer there are skipped
  /// (f still sees ops of other ranks: the stored ones, and those of the ranges it walks).
  template <class F>
  void for_each_op_in(OpId lo, OpId hi, F&& f, int r0 = INT32_MIN, int r1 = INT32_MAX) const;
  /// The ops in id order as stretches: stored(lo, hi) for ops [lo, hi) held as they are,
  /// copied(base, count, src, rank_offset) for a copied range (op base + k is op src + k on
  /// ranks rank_offset higher). For a pass that needs what a range holds, not each of its ops:
  /// eight replicas' copies are one range read once.
  template <class S, class C>
  void for_each_stretch(S&& stored, C&& copied) const;
  /// Ops held in memory (size() less the copies).
  size_t stored_ops() const { return ops_.size(); }
  int num_ranks() const { return num_ranks_; }
  /// Edges, counting a copy's (copy_ops) after finalize; while building, the edges added so
  /// far (the indices copy_ops takes: a copy's own edges are its original's, never added).
  size_t num_edges() const { return finalized_ ? edges_total_ : edge_from_.size(); }

  /// Explicit predecessors / successors (after finalize), in the order their edges were added.
  /// Copies for tests and cold paths; engines walk them with for_each_successor / waits_on.
  std::vector<OpId> preds(OpId id) const;
  std::vector<OpId> succs(OpId id) const;
  template <class F>
  void for_each_pred(OpId id, F&& f) const {
    for_each_edge(1, id, f);
  }
  template <class F>
  void for_each_succ(OpId id, F&& f) const {
    for_each_edge(0, id, f);
  }
  /// Ops on one (rank, stream) run in id order: a transfer occupies its sender's queue (side
  /// 0: rank, stream) and its receiver's (side 1: peer, peer_stream); unordered ops none. The
  /// op after / before `id` on its side's queue, or kNoOp (after finalize).
  OpId queue_next(OpId id, int side) const { return queue_link(id, side, 0); }
  OpId queue_prev(OpId id, int side) const { return queue_link(id, side, 1); }
  /// Calls f(succ) for every op that waits on `id`: explicit successors, then the next op on
  /// each queue it occupies (with multiplicity, as an engine counts them down).
  template <class F>
  void for_each_successor(OpId id, F&& f) const;
  /// How many ops `id` waits for: explicit predecessors plus the op before it on each queue.
  uint32_t waits_on(OpId id) const;

  /// Build hint read by add_collective: ring collectives as one pipelined transfer per rank
  /// instead of their algorithm steps (see scenario::CollectiveModel).
  void set_pipelined_collectives(bool on) { pipelined_collectives_ = on; }
  bool pipelined_collectives() const { return pipelined_collectives_; }

  /// Build hint for a graph whose step time alone the analytic engine replays
  /// (SimulationSpec::lean_collectives): phantom GPUs are those of data-parallel replicas
  /// that are not built (replica symmetry). They take part only in the DP collectives, and a
  /// pipelined ring lane moves in lockstep at its slowest member's pace, so its transfers
  /// between two of them are left out but for those that set that pace (lean_lanes.cpp).
  /// `twin[r]` >= 0 marks phantom GPU r and names the built GPU whose part it plays.
  void set_phantom_ranks(const std::vector<int32_t>& twin);
  bool has_phantoms() const { return !phantoms_.state.empty(); }
  bool phantom(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < phantoms_.state.size() &&
           phantoms_.state[static_cast<size_t>(rank)] != Phantoms::kReal;
  }
  Phantoms& phantoms() { return phantoms_; }

  /// Bystander GPUs (`mask[r]` != 0): those of data-parallel replicas a full graph does not
  /// build (replica symmetry, replicas.hpp). They run only the collectives they join, and the
  /// graph remembers the last op queued on each of their streams, so that a collective whose
  /// transfers all wait for its join launches NCCL on its bystander members as one op
  /// (collectives.cpp). Ops copied onto a bystander (copy_ops) throw std::logic_error.
  void set_bystanders(std::vector<uint8_t> mask);
  /// Every GPU is built after all (a refused symmetry): launches already folded stand, as the
  /// ops their collectives queued behind them wait for their joins.
  void clear_bystanders() {
    bystander_ = {};
    tails_ = {};
  }
  bool has_bystanders() const { return !bystander_.empty(); }
  bool bystander(int rank) const {
    return rank >= 0 && static_cast<size_t>(rank) < bystander_.size() && bystander_[static_cast<size_t>(rank)] != 0;
  }
  /// The last op queued on bystander `rank`'s `stream` so far (stream order: unordered ops are
  /// not queued), or kNoOp.
  OpId bystander_tail(int rank, uint16_t stream) const;
  /// A lean build's collective facts by group (collective_parts.hpp): the same groups gather
  /// every layer's weights; emptied by finalize().
  std::shared_ptr<detail::CollectiveMemo>& collective_memo() { return memo_; }

  /// The fleet noise the replay applies to priced ops (engine::ReplayOptions may replace it).
  void set_noise(ComputeNoise n) { noise_ = std::move(n); }
  const ComputeNoise& noise() const { return noise_; }

  /// Graphviz DOT of the graph (small graphs only).
  std::string to_dot() const;

  /// A readable one-line description of an op: "L3 fwd ring-zigzag step 2 attn_fwd [r1]".
  std::string describe(OpId id) const;

 private:
  /// Ops [base, base + count) are ops [src, src + count) on ranks shifted by rank_offset;
  /// a stored op after them is ops_[id - copied_before - count].
  struct CopyRange {
    OpId base;
    uint32_t count;
    OpId src;
    int32_t rank_offset;
    size_t copied_before;   ///< copied ops before base
    size_t internal_edges;  ///< edges between ops of the copied range (for num_edges())
    int32_t min_rank, max_rank;  ///< the ranks and peers its ops have, from .. to
    bool one_hop = false;  ///< copies stored ops before every copy (index_copies): see one_hop()
  };
  Op copied_op(OpId id) const;
  /// Index into ops_ of stored op `id`, or SIZE_MAX if it is a copy.
  size_t stored_index(OpId id) const;
  bool before_copies(OpId id) const { return copies_.empty() || id < copies_.front().base; }
  /// A copied op's way back to the stored op it copies: at[0] = id, at[j + 1] is the op at[j]
  /// copies (hop[j] the copy range at[j] is in), at[depth] is stored, as ops_[stored].
  static constexpr int kMaxCopyDepth = 8;
  struct CopyChain {
    int depth;
    size_t stored;
    OpId at[kMaxCopyDepth + 1];  // (left uninitialised past depth: built per op on hot paths)
    const CopyRange* hop[kMaxCopyDepth];
  };
  CopyChain chain(OpId id) const;
  [[noreturn]] static void too_deep();
  /// The last copy range whose base is at most `id` (>= the first's): from range_block_, then
  /// a step or two. Why: chain() is on every start of a copied op, and scanning the ranges
  /// back to front (twice: the copy, then its source) was ~110 instructions a call, 8 % of
  /// the 70B full replay's instructions (counted with its 80 layers cut to 16).
  const CopyRange* range_of(OpId id) const;
  /// The copy range of copied op `id` when it copies a stored op in one hop (its original's
  /// range is stored ops before any copy, as every replica's is): else nullptr (chain()).
  const CopyRange* one_hop(OpId id) const {
    const CopyRange* c = range_of(id);
    return c->one_hop && id - c->base < c->count ? c : nullptr;
  }
  /// chain_edges and chain_queue_link for a one-hop copy (one_hop), without building its chain:
  /// f(t) for each explicit neighbour (dir 0: successors, 1: predecessors), then its queues'.
  /// Why: every start and end of the 70B full replay's copied ops walks these; through chain()
  /// they were ~100 instructions an op more (counted with the layers cut to 16).
  template <class F>
  void one_hop_neighbours(int dir, const CopyRange& c, OpId id, F&& f) const;
  /// A copied op's queue neighbour that is not its original's shifted (copy_links_), or kNoOp.
  OpId own_queue_link(OpId id, int side, int dir) const;
  /// Per block of 2^kRangeBlockShift ids from the first copy's base to the last's: the last
  /// range whose base is at most the block's first id (rebuilt by copy_ops).
  static constexpr int kRangeBlockShift = 14;
  std::vector<uint32_t> range_block_;
  void index_copies();
  OpId chain_queue_link(const CopyChain& ch, int side, int dir) const;
  /// Neighbour of `id` on its `side` queue, dir 0: next, 1: previous.
  OpId queue_link(OpId id, int side, int dir) const {
    if (before_copies(id)) {
      const OpId t = qlink_[dir][side][id];
      return t == kNotQueued ? kNoOp : t;
    }
    return copied_queue_link(id, side, dir);
  }
  OpId copied_queue_link(OpId id, int side, int dir) const;
  /// Explicit edges of `id`, dir 0: successors, 1: predecessors. A copy's are its original's
  /// that stay inside the copied range, shifted to the copy, then those added to it later.
  template <class F>
  void for_each_edge(int dir, OpId id, F&& f) const {
    if (before_copies(id)) {
      const auto& off = edge_off_[dir];
      const OpId* to = edge_csr_[dir].data();
      for (uint32_t e = off[id]; e < off[id + 1]; ++e) f(to[e]);
      return;
    }
    chain_edges(dir, chain(id), f);
  }
  template <class F>
  void chain_edges(int dir, const CopyChain& ch, F&& f) const;
  bool extra_flag(int dir, OpId id) const { return (extra_bits_[dir][id >> 6] >> (id & 63)) & 1; }
  /// Per copied range, the first and last op (offset, side) on each (rank, stream) queue.
  struct QueueEnds {
    int32_t rank;
    uint16_t stream;
    uint8_t first_side, last_side;
    OpId first, last;  ///< offsets into the range
  };
  std::vector<QueueEnds> queue_ends(OpId first, OpId count) const;

  support::ChunkedVector<Op> ops_;
  std::vector<CopyRange> copies_;  ///< by base
  size_t size_ = 0;                ///< op ids: stored and copied
  support::ChunkedVector<OpId> edge_from_, edge_to_;  ///< until finalize(): then CSR only
  /// After finalize, by stored index (ops_'s order): explicit edges in CSR form, [0] successors
  /// and [1] predecessors, the other ends by op id; each op's neighbours on its queues,
  /// qlink_[dir][side] (dir 0: next, 1: previous), kNoOp at a queue's end and kNotQueued where
  /// it occupies no queue on that side. A copied op (copy_ops) has none of its own: it reads
  /// its original's, shifted, so a copied replica costs no structure per op.
  std::vector<uint32_t> edge_off_[2];
  std::vector<OpId> edge_csr_[2];
  std::vector<OpId> qlink_[2][2];
  static constexpr OpId kNotQueued = kNoOp - 1;
  /// Copied ops: edges added to them after copying, (op, other end) sorted by op in the order
  /// added, flagged per op id in extra_bits_; and their queue neighbours that are not their
  /// originals' shifted (the first and last op a copy puts on each queue), by op << 2 | dir << 1
  /// | side, absent for kNoOp.
  std::vector<std::pair<OpId, OpId>> extra_[2];
  std::vector<uint64_t> extra_bits_[2];
  std::unordered_map<uint64_t, OpId> copy_links_;
  size_t edges_total_ = 0;
  /// Ranges already copied: an edge added inside one later would be missing from its copies.
  /// Each with the lowest rank or peer (>= 0) of its ops and the highest, read once per range.
  struct CopiedSource {
    OpId first, last;
    int32_t lo = INT32_MAX, hi = INT32_MIN;
  };
  std::vector<CopiedSource> copied_sources_;
  std::array<size_t, 4> last_copied_range_{};  ///< copy_ops' last checked range and edges
  std::vector<std::string> strings_{""};
  /// Looked up by string_view: intern() is called for every label of every op, and building a
  /// std::string per lookup (and hashing it) was ~7 % of a 405B plan child (perf).
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, ViewHash, std::equal_to<>> string_ids_{{"", 0}};
  /// intern()'s last answers by the caller's pointer (labels are mostly string literals): a hit
  /// still compares the characters, so a reused buffer with other text misses.
  struct RecentIntern {
    const char* data = nullptr;
    size_t size = 0;
    uint32_t id = 0;
  };
  RecentIntern recent_[64];
  std::vector<KernelShape> shapes_;
  std::vector<Pipeline> pipelines_;  ///< by first op
  int num_ranks_ = 0;
  size_t op_limit_ = 0;
  double copied_weight_ = 1.0;
  /// Stored ops plus `copied` more at copied_weight_, against op_limit_.
  bool over_limit(size_t stored, size_t copied) const {
    return op_limit_ != 0 &&
           static_cast<double>(stored) + copied_weight_ * static_cast<double>(copied) > static_cast<double>(op_limit_);
  }
  bool finalized_ = false;
  bool backward_edge_ = false;  ///< an explicit edge to a lower id was added (finalize)
  /// Throws naming an op on a cycle, if any (finalize, for graphs with a backward edge).
  void check_acyclic();
  bool pipelined_collectives_ = false;
  Phantoms phantoms_;
  /// Bystanders and their streams' last queued ops (rank x kTailStreams), until finalize().
  static constexpr uint16_t kTailStreams = 32;
  std::vector<uint8_t> bystander_;
  std::vector<OpId> tails_;
  void note_tail(int rank, uint16_t stream, OpId id);
  std::shared_ptr<detail::CollectiveMemo> memo_;
  ComputeNoise noise_;
};

}  // namespace cpsim::schedule

#include "schedule/task_graph_copies.hpp"  // (TaskGraph's walks through copied ranges)
