// `cpsim collective`: one NCCL collective per message size, simulated on a platform and printed
// as nccl-tests prints it (all_reduce_perf & co.), so users can lay it next to their own runs.
//
// Each size is its own replay. With SimGrid each runs in a child process (one Engine per
// process): the sizes stay independent, exactly as nccl-tests times them one after another,
// and each child's memory is returned when it exits. Starting one costs about a millisecond.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/child_replay.hpp"
#include "app/collective_args.hpp"
#include "app/collective_curve.hpp"
#include "app/commands.hpp"
#include "engine/replay.hpp"
#include "report/output.hpp"
#include "scenario/load.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::app {

namespace {

using schedule::CollOp;
using schedule::Protocol;

/// Above this many transfers a stepwise collective is refused (the pipelined form gives the same
/// time without contention, and 16,384 ranks are 268 M pairs): 20 M transfers need about 4 GB in the replay.
constexpr double kMaxStepwiseTransfers = 20e6;

/// What bounds a collective from below: the link (or the software path's cap) that its
/// transfers load the longest, summed over the whole collective as the schedule placed it.
struct Bound {
  std::string what;        ///< the link's name, or "p2p cap"
  std::string cls;         ///< its link class
  double rate_Bps = 0;     ///< what one transfer can reach on it
  double bytes = 0;        ///< what the collective moves over it
  double time_s() const { return rate_Bps > 0 ? bytes / rate_Bps : 0; }
};

struct Row {
  double size = 0, count = 0, time_s = 0, algbw = 0, busbw = 0, predicted_s = 0;
  std::string algo, proto;
  int channels = 0;
  Bound bound;
};

/// The busiest resource of the graph's transfers: each link's wire bytes over its bandwidth
/// (nominal x efficiency), and each capped transfer's bytes over its cap (NCCL's p2p path); the
/// longest of these is a lower bound on the collective's time whatever the latencies.
Bound busiest(const schedule::TaskGraph& g, const model::Topology& topo) {
  std::vector<double> load(topo.links().size(), 0.0);
  Bound b;
  for (const auto& op : g.ops()) {
    if (op.kind != schedule::OpKind::Transfer || op.rank == op.peer) continue;
    for (uint32_t l : topo.route(op.rank, op.peer)) load[l] += op.bytes;
    if (op.max_rate_Bps > 0 && op.bytes / op.max_rate_Bps > b.time_s())
      b = {"p2p cap", "software", op.max_rate_Bps, op.bytes};
  }
  for (size_t l = 0; l < load.size(); ++l) {
    const auto& link = topo.links()[l];
    if (link.bw_Bps > 0 && load[l] / link.bw_Bps > b.time_s())
      b = {link.name, model::link_class_name(link.cls), link.bw_Bps, load[l]};
  }
  return b;
}

Row run_one(const CollArgs& a, const model::Topology& topo, int n, double bytes,
            scenario::EngineKind kind, bool pipelined) {
  schedule::TaskGraph g;
  g.set_pipelined_collectives(pipelined);
  Row row;
  if (a.sendrecv) {
    // nccl-tests sendrecv_perf: every rank sends `bytes` to rank+1 and receives from rank-1.
    schedule::OpLabel l;
    l.name = g.intern("sendrecv");
    l.category = g.intern("p2p");
    std::vector<int> all(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    const schedule::GroupShape comm = schedule::group_shape(topo, all);
    for (int i = 0; i < n; ++i)
      schedule::add_p2p(g, topo, i, (i + 1) % n, bytes, l, schedule::kNoOp, schedule::stream::kCpSend,
                        schedule::stream::kCpRecv, &comm);
    // The columns name the pair that sets the time: one through the network when any is.
    int from = 0;
    for (int i = 0; i < n; ++i)
      if (!topo.same_nvlink_domain(i, (i + 1) % n)) {
        from = i;
        break;
      }
    const schedule::P2pPlan plan = schedule::p2p_plan(topo, comm, from, (from + 1) % n, bytes);
    row.algo = "P2P";
    row.proto = n > 1 ? schedule::protocol_name(plan.protocol) : "-";
    row.channels = n > 1 ? plan.channels : 0;
  } else {
    schedule::CollectiveRequest req;
    req.op = a.op;
    for (int i = 0; i < n; ++i) req.ranks.push_back(i);
    req.bytes = bytes;
    req.protocol = a.protocol;
    req.algorithm = a.algorithm;
    req.channels = a.channels;
    const auto res = schedule::add_collective(g, topo, req);
    // (All-to-all is NCCL's grouped send/recv, no collective algorithm: "P2P" as sendrecv.)
    row.algo = n < 2 ? "-" : a.op == CollOp::AllToAll ? "P2P" : schedule::algorithm_name(res.algorithm);
    row.proto = n > 1 ? schedule::protocol_name(res.protocol) : "-";
    row.channels = n > 1 ? res.channels : 0;
    row.predicted_s = res.predicted_s;
  }
  g.finalize();
  row.bound = busiest(g, topo);
  const engine::Trace tr = kind == scenario::EngineKind::SimGrid
                               ? replay_in_child(g, topo, kind)
                               : engine::replay_analytic(g, topo);
  row.time_s = tr.makespan_s;
  if (!std::isfinite(row.time_s) || row.time_s < 0 || row.time_s > 1e9)
    throw std::runtime_error("the " + std::to_string(static_cast<long long>(bytes)) +
                             "-byte collective gave a non-finite or absurd time (" +
                             std::to_string(row.time_s) + " s)");
  return row;
}

int run_collective(const CollArgs& raw) {
  try {
    CollArgs a = raw;
    finish_args(a);
    const scenario::PlatformSpec spec = scenario::load_platform(a.platform, a.params);
    const model::Topology topo(spec);
    const int n = a.ranks == 0 ? topo.gpus() : a.ranks;
    if (n < 1) throw UsageError("--ranks: must be at least 1");
    if (n > topo.gpus())
      throw UsageError("--ranks " + std::to_string(n) + " exceeds the " +
                       std::to_string(topo.gpus()) + " GPUs of platform " + spec.name);
    // All-to-all pairs run at once (all_to_all.cpp): past schedule::kMaxAllToAllPairs of them
    // it is pipelined, as every collective past 512 ranks.
    const bool a2a = !a.sendrecv && a.op == CollOp::AllToAll;
    const double pairs = static_cast<double>(n) * (n - 1);
    const bool pipelined = a.collectives == "pipelined" ||
                           (a.collectives == "auto" && (n > 512 || (a2a && pairs > schedule::kMaxAllToAllPairs)));
    if (!pipelined && a2a && pairs > schedule::kMaxAllToAllPairs)
      throw UsageError("--collectives steps: an all-to-all on " + std::to_string(n) + " ranks is " +
                       std::to_string(static_cast<long long>(pairs)) + " transfers at once (limit " +
                       std::to_string(static_cast<long long>(schedule::kMaxAllToAllPairs)) +
                       ", 128 ranks); use --collectives pipelined or auto");
    if (!pipelined && !a.sendrecv && !a2a) {
      const double steps = a.op == CollOp::AllReduce ? 2.0 * (n - 1) : n - 1;
      const double transfers = steps * n * std::max(1, spec.nics_per_node);
      if (transfers > kMaxStepwiseTransfers)
        throw UsageError("--collectives steps on " + std::to_string(n) + " ranks needs about " +
                         std::to_string(static_cast<long long>(transfers)) +
                         " transfers (limit 20000000); use --collectives pipelined or auto");
    }
    const Factors f = op_factors(a, n);

    std::printf("# cpsim collective (nccl-tests format): %s, %d ranks on %s (%d GPUs), engine %s, "
                "collectives %s\n",
                a.sendrecv ? "sendrecv" : schedule::coll_op_name(a.op), n, spec.name.c_str(),
                topo.gpus(), a.engine.c_str(), pipelined ? "pipelined" : "steps");
    std::printf("# algorithm %s, protocol %s, channels %s; iters %d (the simulation is deterministic: "
                "every iteration takes the same time)\n",
                schedule::algorithm_name(a.algorithm), schedule::protocol_name(a.protocol),
                a.channels > 0 ? std::to_string(a.channels).c_str() : "auto", a.iters);
    std::printf("# busbw = algbw x %.4g (nccl-tests); GB/s = 1e9 bytes/s; #wrong: N/A (no data)\n#\n",
                f.busbw);
    std::printf("# %62s %34s\n", "out-of-place", "in-place");
    std::printf("# %10s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s  %-8s %-6s %s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                "algbw", "busbw", "#wrong", "algo", "proto", "channels");
    std::printf("# %10s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
    nlohmann::json results = nlohmann::json::array();
    double bus_sum = 0;
    Row last;
    for (double requested : a.size_list) {
      const double count = std::floor(requested / (f.type_bytes * f.count_div));
      const double bytes = count * f.type_bytes * f.count_div;  // nccl-tests aligns sizes so
      Row r = run_one(a, topo, n, bytes, a.engine_kind, pipelined);
      r.size = bytes;
      r.count = count;
      r.algbw = r.time_s > 0 ? bytes / r.time_s / 1e9 : 0;
      r.busbw = r.algbw * f.busbw;
      bus_sum += r.busbw;
      last = r;
      // In place runs the same algorithm on the same links in this model: the same row.
      std::printf("  %10.0f %12.0f %8s %6s %6d %9.2f %8.2f %8.2f %6s %9.2f %8.2f %8.2f %6s  %-8s "
                  "%-6s %d\n",
                  bytes, count, a.datatype.c_str(), f.redop.c_str(), f.root, r.time_s * 1e6, r.algbw,
                  r.busbw, "N/A", r.time_s * 1e6, r.algbw, r.busbw, "N/A", r.algo.c_str(),
                  r.proto.c_str(), r.channels);
      std::fflush(stdout);
      results.push_back({{"size_bytes", bytes},
                         {"count", count},
                         {"type", a.datatype},
                         {"redop", f.redop},
                         {"root", f.root},
                         {"time_us", r.time_s * 1e6},
                         {"algbw_GBps", r.algbw},
                         {"busbw_GBps", r.busbw},
                         {"algo", r.algo},
                         {"proto", r.proto},
                         {"channels", r.channels},
                         {"nccl_model_time_us", r.predicted_s * 1e6},
                         {"bound", {{"link", r.bound.what},
                                    {"class", r.bound.cls},
                                    {"rate_GBps", r.bound.rate_Bps / 1e9},
                                    {"bytes", r.bound.bytes},
                                    {"time_us", r.bound.time_s() * 1e6}}}});
    }
    const double avg = a.size_list.empty() ? 0 : bus_sum / a.size_list.size();
    std::printf("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : %g \n#\n", avg);
    if (last.bound.time_s() > 0 && last.time_s > 0) {
      // The bound of the largest size: which link its algorithm loads most, at what rate.
      const double bound_bus = last.size / last.bound.time_s() / 1e9 * f.busbw;
      std::printf("# Bound at %.0f B (%s %s, %d channels): %s (%s, %.1f GB/s) carries %.3f GB "
                  "of it, >= %.2f us: busbw <= %.2f GB/s; simulated %.2f (%.0f %% of the bound)\n",
                  last.size, last.algo.c_str(), last.proto.c_str(), last.channels,
                  last.bound.what.c_str(), last.bound.cls.c_str(), last.bound.rate_Bps / 1e9,
                  last.bound.bytes / 1e9, last.bound.time_s() * 1e6, bound_bus, last.busbw,
                  100.0 * last.busbw / bound_bus);
    }
    if (!a.json.empty()) {
      nlohmann::json doc = {{"op", a.sendrecv ? "sendrecv" : schedule::coll_op_name(a.op)},
                            {"platform", spec.name},
                            {"ranks", n},
                            {"engine", a.engine},
                            {"avg_busbw_GBps", avg},
                            {"results", results}};
      report::write_atomic(a.json, doc.dump(2) + "\n");
    }
    return 0;
  } catch (const UsageError& e) {
    std::cerr << "cpsim collective: error: " << e.what() << "\n";
    return 2;
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {  // platform that cannot be built, impossible algo
    std::cerr << "cpsim collective: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cpsim collective: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

std::vector<CurvePoint> simulate_curve(const scenario::PlatformSpec& spec, const std::string& op,
                                       int ranks, const std::vector<double>& sizes,
                                       scenario::EngineKind engine) {
  CollArgs a;
  a.op_name = op;
  a.sizes = "1K";  // finish_args wants a size list; the sizes below are used instead
  finish_args(a);
  a.engine_kind = engine;
  const model::Topology topo(spec);
  if (ranks < 1 || ranks > topo.gpus())
    throw UsageError(std::to_string(ranks) + " ranks: the platform " + spec.name + " has " +
                     std::to_string(topo.gpus()) + " GPUs");
  const bool a2a = !a.sendrecv && a.op == CollOp::AllToAll;
  const double pairs = static_cast<double>(ranks) * (ranks - 1);
  const bool pipelined = ranks > 512 || (a2a && pairs > schedule::kMaxAllToAllPairs);
  const Factors f = op_factors(a, ranks);
  std::vector<CurvePoint> out;
  for (double bytes : sizes) {
    const Row r = run_one(a, topo, ranks, bytes, engine, pipelined);
    CurvePoint p;
    p.bytes = bytes;
    p.time_s = r.time_s;
    p.busbw_GBps = r.time_s > 0 ? bytes / r.time_s / 1e9 * f.busbw : 0;
    p.algo = r.algo;
    p.proto = r.proto;
    p.channels = r.channels;
    out.push_back(p);
  }
  return out;
}

void register_collective(CLI::App& app, int& rc) {
  auto opts = std::make_shared<CollArgs>();
  CLI::App* sub = app.add_subcommand(
      "collective", "nccl-tests-style table of one collective simulated on a platform");
  add_collective_options(*sub, *opts);
  sub->callback([opts, &rc] { rc = run_collective(*opts); });
}

}  // namespace cpsim::app
