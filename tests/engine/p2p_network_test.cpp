// NCCL send/recv between nodes as the replay runs it: the net transport's latency for a small
// message, and a rank that sends to one neighbour while receiving from another (the ring CP
// pattern, and the backward's dK,dV beside the next K,V block) at the rate of one NIC
// direction each, since a NIC's two directions are independent links.
#include <gtest/gtest.h>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "schedule/collectives.hpp"
#include "support/platforms.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using cpsim::model::Topology;
using cpsim::scenario::EngineKind;
using namespace cpsim::schedule;

namespace {

struct Send {
  int src, dst;
  double bytes;
  uint16_t send_stream = stream::kCpSend, recv_stream = stream::kCpRecv;
};

double makespan(const Topology& topo, const std::vector<Send>& sends) {
  TaskGraph g;
  OpLabel l;
  l.name = g.intern("p2p");
  l.category = g.intern("p2p");
  for (const Send& s : sends)
    add_p2p(g, topo, s.src, s.dst, s.bytes, l, kNoOp, s.send_stream, s.recv_stream);
  g.finalize();
  return cpsim::app::replay_in_child(g, topo, EngineKind::SimGrid).makespan_s;
}

}  // namespace

TEST(P2pNetwork, ASmallMessagePaysTheNetTransportsStepLatency) {
  const Topology topo(cpsim::test::dgx_h100(2));
  // 64 KiB runs Simple on one channel (enqueue.cc: a channel per 64 KiB): p2p launch 2.5 us +
  // tuning.cc's network Simple step 14 us + the wire's 2.7 us (NIC, leaf, NIC) + 64 KiB at one
  // channel's 14 GB/s (paths.cc P2P_PER_CHANNEL_NET_BW, 4.7 us).
  const double t = makespan(topo, {{0, 8, 65536}});
  EXPECT_NEAR(t, 2.5e-6 + 14e-6 + 2.69e-6 + 65536 / 14e9, 0.3e-6);
  // 16 KiB runs LL, whose network step is 2.7 us.
  const double ll = makespan(topo, {{0, 8, 16384}});
  EXPECT_NEAR(ll, 2.5e-6 + 2.7e-6 + 2.69e-6 + 16384 / 14e9, 0.3e-6);
  // Inside the node the platform's NVLink p2p figures, as before.
  EXPECT_LT(makespan(topo, {{0, 1, 65536}}), 4e-6);
}

TEST(P2pNetwork, SendingAndReceivingAtOnceUseTheNicsTwoDirections) {
  const Topology topo(cpsim::test::dgx_h100(3));
  const double gb = 1e9;
  const double alone = makespan(topo, {{0, 8, gb}});
  EXPECT_NEAR(alone, gb / 47e9, 0.01 * gb / 47e9);
  // Rank 8 receives from 0 and sends to 16 (a ring of three nodes on rail 0).
  EXPECT_NEAR(makespan(topo, {{0, 8, gb}, {8, 16, gb}, {16, 0, gb}}), alone, 0.01 * alone);
  // Both ways between two ranks at once.
  EXPECT_NEAR(makespan(topo, {{0, 8, gb}, {8, 0, gb}}), alone, 0.01 * alone);
  // Two sends out of one NIC direction (K,V and a dK,dV partial on their own streams) share it.
  EXPECT_NEAR(makespan(topo, {{0, 8, gb}, {0, 8, gb, stream::kCpGradSend, stream::kCpGradRecv}}),
              2 * alone, 0.02 * alone);
}

}  // namespace CPSIM_TEST_TU
