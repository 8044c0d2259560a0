// The task graph as text: stream names, one op's description, and Graphviz DOT.
#include <sstream>
#include <string>

// Boost.Graph's graphviz writer trips GCC's -Wmaybe-uninitialized inside Boost at -O2.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/graphviz.hpp>

#include "schedule/task_graph.hpp"

namespace cpsim::schedule {

const char* stream::name(uint16_t s) {
  switch (s) {
    case kCompute: return "compute";
    case kHost: return "host";
    case kOffload: return "offload";
    case kCpSend: return "cp-send";
    case kCpRecv: return "cp-recv";
    case kTpSend: return "tp-send";
    case kTpRecv: return "tp-recv";
    case kDpSend: return "dp-send";
    case kDpRecv: return "dp-recv";
    case kDpReplicateSend: return "dp-replicate-send";
    case kDpReplicateRecv: return "dp-replicate-recv";
    case kPpSend: return "pp-send";
    case kPpRecv: return "pp-recv";
    case kPpGradSend: return "pp-grad-send";
    case kPpGradRecv: return "pp-grad-recv";
    case kCpGradSend: return "cp-dkv-send";
    case kCpGradRecv: return "cp-dkv-recv";
    case kCpOuterSend: return "cp-outer-send";
    case kCpOuterRecv: return "cp-outer-recv";
    case kCpOuterGradSend: return "cp-outer-dkv-send";
    case kCpOuterGradRecv: return "cp-outer-dkv-recv";
    case kEpSend: return "ep-send";
    case kEpRecv: return "ep-recv";
    default: return "stream";
  }
}

std::string TaskGraph::describe(OpId id) const {
  const Op op = this->op(id);
  const OpLabel& l = op.label;
  std::ostringstream os;
  if (l.layer >= 0) os << "L" << l.layer << ' ';
  if (l.micro >= 0) os << "mb" << l.micro << ' ';
  if (l.phase == Phase::Forward) os << "fwd ";
  if (l.phase == Phase::Backward) os << "bwd ";
  if (l.phase == Phase::Optimizer) os << "opt ";
  if (l.scheme) os << strings_[l.scheme] << ' ';
  if (l.step >= 0) os << "step " << l.step << ' ';
  os << strings_[l.name];
  if (l.chunk_q >= 0) os << " q" << l.chunk_q << "/kv" << l.chunk_kv;
  if (op.kind == OpKind::Transfer)
    os << " [r" << op.rank << "->r" << op.peer << "]";
  else
    os << " [r" << op.rank << "]";
  return os.str();
}

std::string TaskGraph::to_dot() const {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  G g(size_);
  if (!finalized_)
    for (size_t e = 0; e < edge_from_.size(); ++e) boost::add_edge(edge_from_[e], edge_to_[e], g);
  else  // finalize() keeps the edges in CSR form only
    for (OpId id = 0; id < size_; ++id)
      for_each_succ(id, [&](OpId s) { boost::add_edge(id, s, g); });
  std::ostringstream os;
  boost::write_graphviz(os, g, [&](std::ostream& out, const auto& v) {
    out << "[label=\"" << describe(static_cast<OpId>(v)) << "\"]";
  });
  return os.str();
}

}  // namespace cpsim::schedule
#pragma GCC diagnostic pop
