#include "schedule/collectives.hpp"

#include <gtest/gtest.h>

#include <map>

#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using namespace cpsim::schedule;

namespace {

struct Built {
  TaskGraph g;
  CollectiveResult res;
};

std::unique_ptr<Built> build(const Topology& topo, CollOp op, int n, double bytes,
                             Protocol p = Protocol::Auto, std::vector<OpId> deps = {},
                             Algorithm a = Algorithm::Ring) {
  auto b = std::make_unique<Built>();
  CollectiveRequest req;
  req.algorithm = a;  // the step-structure tests below are about rings
  req.op = op;
  for (int i = 0; i < n; ++i) req.ranks.push_back(i);
  req.bytes = bytes;
  req.protocol = p;
  req.deps = std::move(deps);
  b->res = add_collective(b->g, topo, req);
  return b;
}

double wire_bytes(const TaskGraph& g) {
  double s = 0;
  for (const auto& op : g.ops()) s += op.bytes;
  return s;
}

int max_step(const TaskGraph& g) {
  int m = -1;
  for (const auto& op : g.ops()) m = std::max(m, op.label.step);
  return m;
}

}  // namespace

TEST(Collectives, RingStepCountsAndBytes) {
  Topology topo(cpsim::test::dgx_h100());
  const int n = 8;
  const double S = 1 << 30;
  struct Case {
    CollOp op;
    int steps;
    double data_per_rank;  // payload each rank sends in total
  } cases[] = {{CollOp::AllGather, n - 1, S * (n - 1) / n},
               {CollOp::ReduceScatter, n - 1, S * (n - 1) / n},
               {CollOp::AllReduce, 2 * (n - 1), 2 * S * (n - 1) / n}};
  for (const auto& c : cases) {
    auto b = build(topo, c.op, n, S, Protocol::Simple);
    EXPECT_EQ(b->g.size(), size_t(c.steps) * n) << coll_op_name(c.op);
    EXPECT_EQ(max_step(b->g), c.steps - 1) << coll_op_name(c.op);
    std::map<int, double> sent;
    for (const auto& op : b->g.ops()) {
      EXPECT_EQ(op.kind, OpKind::Transfer);
      EXPECT_NE(op.rank, op.peer);
      sent[op.rank] += op.bytes;
    }
    for (int r = 0; r < n; ++r) EXPECT_NEAR(sent[r], c.data_per_rank, 1) << coll_op_name(c.op);
    EXPECT_EQ(b->res.done.size(), size_t(n));
    EXPECT_NO_THROW(b->g.finalize());
  }
}

TEST(Collectives, RingSendsToTheSuccessorAndForwardsWhatItReceived) {
  Topology topo(cpsim::test::dgx_h100());
  auto b = build(topo, CollOp::AllGather, 4, 4e6, Protocol::Simple);
  auto& g = b->g;
  g.finalize();
  for (OpId id = 0; id < g.size(); ++id) {
    const Op& op = g.op(id);
    EXPECT_EQ(op.peer, (op.rank + 1) % 4);
    EXPECT_EQ(op.stream, stream::kCpSend);
    EXPECT_EQ(op.peer_stream, stream::kCpRecv);
    const auto pv = g.preds(id);
    const OpId *pb = pv.data(), *pe = pb + pv.size();
    if (op.label.step == 0) {
      EXPECT_EQ(pe - pb, 0);
    } else {
      ASSERT_EQ(pe - pb, 1);
      const Op& pred = g.op(*pb);
      EXPECT_EQ(pred.peer, op.rank);
      EXPECT_EQ(pred.label.step, op.label.step - 1);
    }
  }
  // done[i] is rank i's last receive.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(g.op(b->res.done[i]).peer, i);
    EXPECT_EQ(g.op(b->res.done[i]).label.step, 2);
  }
}

TEST(Collectives, ProtocolInflatesWireBytes) {
  Topology topo(cpsim::test::dgx_h100());
  const double S = 64e6;
  auto simple = build(topo, CollOp::ReduceScatter, 8, S, Protocol::Simple);
  auto ll = build(topo, CollOp::ReduceScatter, 8, S, Protocol::LL);
  auto ll128 = build(topo, CollOp::ReduceScatter, 8, S, Protocol::LL128);
  EXPECT_NEAR(wire_bytes(simple->g), S * 7, 1);
  EXPECT_NEAR(wire_bytes(ll->g), 2 * S * 7, 1);
  EXPECT_NEAR(wire_bytes(ll128->g), S * 7 * 128 / 120, 1);
  EXPECT_EQ(ll->res.protocol, Protocol::LL);
}

TEST(Collectives, LatenciesGoIntoEachStep) {
  Topology topo(cpsim::test::dgx_h100());
  auto b = build(topo, CollOp::AllReduce, 8, 1e6, Protocol::LL128);
  const auto& nc = topo.spec().nccl;
  for (const auto& op : b->g.ops()) {
    const double hop = nc.hop_nvlink_s[1];
    EXPECT_DOUBLE_EQ(op.extra_latency_s, op.label.step == 0 ? hop + nc.base_latency_s[1] : hop);
  }
}

TEST(Collectives, TunerPicksLlSmallSimpleLarge) {
  Topology topo(cpsim::test::dgx_h100());
  EXPECT_EQ(build(topo, CollOp::AllReduce, 8, 1024)->res.protocol, Protocol::LL);
  EXPECT_EQ(build(topo, CollOp::AllReduce, 8, 16e6)->res.protocol, Protocol::LL128);
  EXPECT_EQ(build(topo, CollOp::AllReduce, 8, 1e9)->res.protocol, Protocol::Simple);
  // Predicted time grows with size and the choice is the cheapest.
  for (double size : {1e3, 1e5, 1e7, 1e9}) {
    auto best = build(topo, CollOp::AllGather, 8, size);
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
      EXPECT_LE(best->res.predicted_s, build(topo, CollOp::AllGather, 8, size, p)->res.predicted_s);
  }
}

TEST(Collectives, CrossNodeHopsUseNetworkLatency) {
  Topology topo(cpsim::test::dgx_h100(2));
  auto b = build(topo, CollOp::AllGather, 16, 1e9, Protocol::Simple);
  const auto& nc = topo.spec().nccl;
  for (const auto& op : b->g.ops()) {
    if (op.kind != OpKind::Transfer) continue;  // the zero-time stream fences of the 8 lanes
    const bool net = op.rank / 8 != op.peer / 8;
    const double hop = net ? nc.hop_net_s[2] : nc.hop_nvlink_s[2];
    EXPECT_DOUBLE_EQ(op.extra_latency_s - (op.label.step == 0 ? nc.base_latency_s[2] : 0), hop);
  }
}

TEST(Collectives, DepsGateTheFirstSendAndReceiveOfEachRank) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  std::vector<OpId> deps;
  OpLabel l;
  for (int i = 0; i < 4; ++i) deps.push_back(g.add_compute(i, stream::kCompute, 1e-6, l));
  CollectiveRequest req;
  req.op = CollOp::ReduceScatter;
  req.ranks = {0, 1, 2, 3};
  req.bytes = 4e6;
  req.deps = deps;
  auto res = add_collective(g, topo, req);
  g.finalize();
  for (OpId id = 4; id < g.size(); ++id) {
    const Op& op = g.op(id);
    if (op.label.step != 0) continue;
    const std::vector<OpId> preds = g.preds(id);
    EXPECT_EQ(preds, (std::vector<OpId>{deps[op.rank], deps[op.peer]}));
  }
}

TEST(Collectives, GroupOfOneReturnsDepsUnchanged) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  OpLabel l;
  OpId d = g.add_compute(3, 0, 1e-6, l);
  CollectiveRequest req;
  req.op = CollOp::AllReduce;
  req.ranks = {3};
  req.bytes = 1e9;
  req.deps = {d};
  auto res = add_collective(g, topo, req);
  EXPECT_EQ(res.done, std::vector<OpId>{d});
  EXPECT_EQ(g.size(), 1u);
  req.deps.clear();
  EXPECT_EQ(add_collective(g, topo, req).done, std::vector<OpId>{kNoOp});
}

TEST(Collectives, BroadcastPipelinesTheBufferDownTheChain) {
  Topology topo(cpsim::test::dgx_h100());
  const double S = 64e6;
  auto b = build(topo, CollOp::Broadcast, 4, S, Protocol::Simple);
  std::map<int, double> received;
  for (const auto& op : b->g.ops()) {
    EXPECT_EQ(op.peer, op.rank + 1);
    received[op.peer] += op.bytes;
  }
  for (int r = 1; r < 4; ++r) EXPECT_NEAR(received[r], S, 1);
  EXPECT_EQ(b->g.size(), 6u);  // first chunk + rest per hop
  EXPECT_NO_THROW(b->g.finalize());
}

TEST(Collectives, AllToAllPairsIWithIXorKForPowersOfTwo) {
  Topology topo(cpsim::test::dgx_h100());
  auto b = build(topo, CollOp::AllToAll, 8, 8e6, Protocol::Simple);
  std::map<std::pair<int, int>, int> pairs;
  for (const auto& op : b->g.ops()) {
    if (op.kind != OpKind::Transfer) continue;  // (the fence's begin and end ops)
    EXPECT_EQ(op.peer, op.rank ^ (op.label.step + 1));
    pairs[{op.rank, op.peer}]++;
  }
  EXPECT_EQ(pairs.size(), 56u);  // every ordered pair exactly once
  EXPECT_NO_THROW(b->g.finalize());
}

TEST(Collectives, AllToAllShiftsByKOtherwise) {
  Topology topo(cpsim::test::dgx_h100());
  auto b = build(topo, CollOp::AllToAll, 6, 6e6, Protocol::Simple);
  std::map<std::pair<int, int>, int> pairs;
  for (const auto& op : b->g.ops()) {
    if (op.kind != OpKind::Transfer) continue;
    EXPECT_EQ((op.peer - op.rank + 6) % 6, op.label.step + 1);
    pairs[{op.rank, op.peer}]++;
  }
  EXPECT_EQ(pairs.size(), 30u);
  EXPECT_NO_THROW(b->g.finalize());
}

TEST(Collectives, BadRequestsThrow) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  CollectiveRequest req;
  EXPECT_THROW(add_collective(g, topo, req), std::invalid_argument);
  req.ranks = {0, 1, 1};
  EXPECT_THROW(add_collective(g, topo, req), std::invalid_argument);
  req.ranks = {0, 1};
  req.deps = {kNoOp};
  EXPECT_THROW(add_collective(g, topo, req), std::invalid_argument);
  req.deps.clear();
  req.ranks = {0, 9};
  EXPECT_THROW(add_collective(g, topo, req), std::out_of_range);
}

TEST(Collectives, P2pCarriesNcclCapAndLatency) {
  Topology topo(cpsim::test::dgx_h100());
  TaskGraph g;
  OpLabel l;
  OpId d = g.add_compute(0, 0, 1e-6, l);
  OpId t = add_p2p(g, topo, 0, 1, 1e6, l, d);
  EXPECT_DOUBLE_EQ(g.op(t).max_rate_Bps, 180e9);
  EXPECT_DOUBLE_EQ(g.op(t).extra_latency_s, 2.5e-6);
  EXPECT_DOUBLE_EQ(g.op(t).bytes, 1e6);
  g.finalize();
  ASSERT_EQ(g.preds(t), std::vector<OpId>{d});
}

TEST(Collectives, Names) {
  EXPECT_STREQ(coll_op_name(CollOp::ReduceScatter), "reducescatter");
  EXPECT_STREQ(protocol_name(Protocol::LL128), "LL128");
}

}  // namespace CPSIM_TEST_TU
