// The pipelined collective model (one transfer per rank) is a speed-up for large meshes: on
// contention-free symmetric rings it must give the same time as the step-by-step model.
#include <gtest/gtest.h>

#include "app/child_replay.hpp"
#include "engine/replay.hpp"
#include "schedule/collectives.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {
double collective_time(schedule::CollOp op, int n, double bytes, bool pipelined, bool simgrid,
                       size_t* ops = nullptr) {
  auto spec = fixtures::nvswitch_node(n, 450e9 * 0.824, 0.3e-6);
  model::Topology topo(spec);
  schedule::TaskGraph g;
  g.set_pipelined_collectives(pipelined);
  schedule::CollectiveRequest req;
  req.op = op;
  for (int i = 0; i < n; ++i) req.ranks.push_back(i);
  req.bytes = bytes;
  schedule::add_collective(g, topo, req);
  g.finalize();
  if (ops) *ops = g.size();
  return (simgrid ? app::replay_in_child(g, topo, scenario::EngineKind::SimGrid)
                  : engine::replay_analytic(g, topo))
      .makespan_s;
}
}  // namespace

TEST(PipelinedCollectives, SameTimeAsStepsWithoutContention) {
  for (auto op : {schedule::CollOp::AllReduce, schedule::CollOp::AllGather,
                  schedule::CollOp::ReduceScatter})
    for (double bytes : {1e3, 1e6, 64e6, 1e9})
      for (bool simgrid : {false, true}) {
        const double steps = collective_time(op, 8, bytes, false, simgrid);
        const double piped = collective_time(op, 8, bytes, true, simgrid);
        EXPECT_NEAR(piped, steps, 1e-6 * steps)
            << schedule::coll_op_name(op) << " " << bytes << " B simgrid=" << simgrid;
      }
}

TEST(PipelinedCollectives, UsesFewerOps) {
  size_t steps_ops = 0, piped_ops = 0;
  collective_time(schedule::CollOp::AllReduce, 16, 1e8, false, false, &steps_ops);
  collective_time(schedule::CollOp::AllReduce, 16, 1e8, true, false, &piped_ops);
  EXPECT_EQ(steps_ops, 16u * 30u);
  EXPECT_EQ(piped_ops, 16u + 1u);
}

}  // namespace CPSIM_TEST_TU
