// NCCL's Tree, NVLS and NVLS-Tree all-reduce as transfers. They are built pipelined: once every
// member joined, each edge streams its whole share at once, and the tuner's latency (launch +
// hops, tuning.cc) is the software latency of every transfer. The links then decide the
// bandwidth, so these algorithms contend with other traffic like the rings do.
#include <algorithm>
#include <map>

#include "schedule/collective_parts.hpp"

namespace cpsim::schedule::detail {

namespace {

/// tuning.cc nvlsEfficiency: the fraction of NVLink bandwidth NVLS multimem operations reach.
double nvls_efficiency(int arch) { return arch >= 3 ? 0.74 : arch == 2 ? 0.85 : 1.0; }

struct Builder {
  TaskGraph& g;
  const model::Topology& topo;
  const CollectiveRequest& req;
  const TunerChoice& c;
  OpLabel label;
  Fence fence;
  OpId join = kNoOp;

  Builder(TaskGraph& g_, const model::Topology& t, const CollectiveRequest& r, const TunerChoice& c_,
          const OpLabel& l)
      : g(g_), topo(t), req(r), c(c_), label(l), fence(open_fence(g_, r, l)) {
    OpLabel sl = label;
    sl.name = g.intern("collective_join");
    join = g.add_compute(req.ranks[0], req.send_stream, 0.0, sl);
    for (OpId b : fence.begin) g.add_edge(b, join);
  }
  void xfer(int from, int to, double wire_bytes) {
    if (from != to) fenced_transfer(g, fence, req, from, to, wire_bytes, label, c.latency_s, join);
  }
  /// The transfers `add` makes move in lockstep (TaskGraph::Pipeline).
  template <class F>
  void pipeline(F&& add) {
    const auto first = static_cast<OpId>(g.size());
    add();
    g.add_pipeline(first, static_cast<OpId>(g.size()));
  }
  CollectiveResult finish() {
    CollectiveResult res;
    res.done = close_fence(g, topo, fence, req, label);
    return res;
  }
};

/// The lane's member in the node block [b, e) of lane.order that sits on the lane's NIC rail
/// (ring_lanes walks odd nodes backwards, so there it is the last): NCCL builds each channel's
/// tree between the same NIC index on every node (NCCL_CROSS_NIC, rail-optimised fabrics), so
/// a lane's inter-node tree stays on one rail and lanes on different rails share no link.
int head_of(const model::Topology& topo, const std::vector<int>& ranks, const Lane& lane,
            size_t b, size_t e, int lane_index) {
  const auto& s = topo.spec();
  const int nics = std::max(1, s.nics_per_node);
  for (size_t j = b; j < e; ++j)
    if ((ranks[lane.order[j]] % s.gpus_per_node) % nics == lane_index % nics) return lane.order[j];
  return lane.order[b];
}

/// NCCL's binary tree over m node indices (src/graph/trees.cc, ncclGetBtree): the parent of
/// index r, -1 for the root 0. The root has one child (the highest power of two below m) and
/// every other inner index two, so an inner node forwards each chunk up once and down twice.
int btree_parent(int m, int r) {
  if (r == 0) return -1;
  int bit = 1;
  while (bit < m && !(bit & r)) bit <<= 1;
  const int up = (r ^ bit) | (bit << 1);
  return up < m ? up : (r ^ bit);
}

/// NCCL's double binary tree over node heads (trees.cc, ncclGetDtree): tree 0 the btree on node
/// order, tree 1 its mirror (r -> m-1-r) when m is even and its shift by one (r -> r+1) when m
/// is odd, so a node inner in one tree is a leaf in the other. Each tree carries half the lane's
/// data up (reduce) and down (broadcast), as one pipeline: a chunk climbs to the root and comes
/// back down through the same channel's buffers. An inner node then sends 3/2 of its half
/// (parent + two children) and a leaf 1/2: each node's NICs carry the lane's data twice
/// (2S over the node's NICs), which bounds Tree and NVLS-Tree across more than two nodes at
/// busbw 2(n-1)/n x NICs x rate / 2.
void inter_node_trees(Builder& b, const std::vector<int>& heads, double lane_wire) {
  const int m = static_cast<int>(heads.size());
  for (int t = 0; t < 2; ++t)
    b.pipeline([&] {
      for (int r = 0; r < m; ++r) {
        int child = r, parent = -1;
        if (t == 0) {
          parent = btree_parent(m, r);
        } else if (m % 2 == 0) {
          const int u = btree_parent(m, m - 1 - r);
          parent = u < 0 ? -1 : m - 1 - u;
        } else {
          const int u = btree_parent(m, (r - 1 + m) % m);
          parent = u < 0 ? -1 : (u + 1) % m;
        }
        if (parent < 0) continue;
        b.xfer(heads[child], heads[parent], lane_wire / 2);
        b.xfer(heads[parent], heads[child], lane_wire / 2);
      }
    });
}

}  // namespace

CollectiveResult build_tree(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label) {
  Builder b(g, topo, req, c, label);
  const double eff = topo.spec().nccl.protocol_efficiency[c.protocol == Protocol::LL      ? 0
                                                          : c.protocol == Protocol::LL128 ? 1
                                                                                          : 2];
  const GroupShape shape = group_shape(topo, req.ranks);
  const auto lanes = ring_lanes(topo, req.ranks, shape.nodes > 1 ? shape.rails : 1,
                                std::max(1, c.channels));
  const int per_node = static_cast<int>(nodes_of(topo, req.ranks)[0].size());
  for (size_t li = 0; li < lanes.size(); ++li) {
    const auto& lane = lanes[li];
    const double wire = req.bytes * lane.share / eff;
    // Inside a node a chain (reduce towards the head, broadcast back), in the lane's order.
    std::vector<int> heads;
    for (size_t k = 0; k < lane.order.size(); k += per_node) {
      const size_t e = std::min(lane.order.size(), k + per_node);
      heads.push_back(lanes.size() > 1 ? head_of(topo, req.ranks, lane, k, e, static_cast<int>(li))
                                       : lane.order[k]);
      b.pipeline([&] {
        for (size_t j = k; j + 1 < e; ++j) {
          b.xfer(lane.order[j + 1], lane.order[j], wire);
          b.xfer(lane.order[j], lane.order[j + 1], wire);
        }
      });
    }
    inter_node_trees(b, heads, wire);
  }
  return b.finish();
}

CollectiveResult build_nvls(TaskGraph& g, const model::Topology& topo, const CollectiveRequest& req,
                            const TunerChoice& c, const OpLabel& label) {
  Builder b(g, topo, req, c, label);
  const double eff = nvls_efficiency(topo.spec().nccl.arch);
  // NVLS multicasts over one NVSwitch fabric: its reduction spans the NVLink domain, which on
  // GB200 NVL72 is 18 trays of 4 GPUs (grouping by tray sent 72-rank NVLS through 18 trees).
  const auto nodes = domains_of(topo, req.ranks);
  // NVLS all-reduce inside a domain: each GPU reduces 1/k of the buffer with multimem.ld_reduce
  // (the switch reads that slice from all k GPUs) and multicasts the result with multimem.st.
  // Each GPU's NVLink then carries S (1 + 1/k) in each direction, at NCCL's NVLS efficiency.
  // Through the switch only the GPU ports carry load, so one transfer per GPU to its neighbour
  // loads every port exactly so, with k transfers instead of k (k - 1).
  for (const auto& m : nodes) {
    const int k = static_cast<int>(m.size());
    if (k < 2) continue;
    const double port = req.bytes * (1.0 + 1.0 / k) / eff;
    b.pipeline([&] {
      for (int j = 0; j < k; ++j) b.xfer(m[j], m[(j + 1) % k], port);
    });
  }
  if (nodes.size() > 1) {
    // NVLS-Tree: the node's reduced buffer crosses nodes on a double binary tree per rail.
    const GroupShape shape = group_shape(topo, req.ranks);
    const auto lanes = ring_lanes(topo, req.ranks, shape.rails, std::max(1, c.channels));
    const int per_node = static_cast<int>(nodes[0].size());
    for (size_t li = 0; li < lanes.size(); ++li) {
      const auto& lane = lanes[li];
      std::vector<int> heads;
      for (size_t k = 0; k < lane.order.size(); k += per_node)
        heads.push_back(lanes.size() > 1
                            ? head_of(topo, req.ranks, lane, k,
                                      std::min(lane.order.size(), k + per_node), static_cast<int>(li))
                            : lane.order[k]);
      inter_node_trees(b, heads, req.bytes * lane.share);
    }
  }
  return b.finish();
}

}  // namespace cpsim::schedule::detail
