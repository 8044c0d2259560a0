#include "schedule/host_lane.hpp"

namespace cpsim::schedule {

OpId add_region_host(TaskGraph& g, int rank, double seconds, const OpLabel& label, OpId first) {
  if (!(seconds > 0)) return kNoOp;
  const OpId h = g.add_compute(rank, stream::kHost, seconds, label);
  for (OpId id = first; id < h; ++id) {
    const Op o = g.op(id);
    if (o.kind == OpKind::Compute && o.rank == rank && o.stream == stream::kCompute) {
      g.add_edge(h, id);
      break;
    }
  }
  return h;
}

}  // namespace cpsim::schedule
