#include "schedule/tp_overlap.hpp"

#include <string>

#include "schedule/collectives.hpp"

namespace cpsim::schedule {

namespace {

using Ops = std::vector<OpId>;

OpLabel comm_label(TpOverlapCtx& c, const char* name, const char* category) {
  OpLabel l;
  l.name = c.g.intern(name);
  l.micro = c.mb;
  l.layer = c.layer;
  l.phase = c.phase;
  l.category = c.g.intern(category);
  l.scheme = c.g.intern("tp-sp");
  return l;
}

int tp_size(const TpOverlapCtx& c) { return c.sc.parallel.tp; }
int cp_size(const TpOverlapCtx& c) { return static_cast<int>(c.ranks.size()) / tp_size(c); }

/// TE's ring exchange in every TP group: tp - 1 steps in which each rank passes the shard it
/// holds to its successor; the GEMM's chunk i (m / tp rows) runs on shard i once it is there.
/// Returns the last chunk's op per grid rank.
Ops ring_exchange_gemm(TpOverlapCtx& c, const std::string& name, double m, double n, double k,
                       const Ops& deps) {
  const int tp = tp_size(c);
  const double slow = ub_slowdown(c.sc, kUbRingExchangeSms);
  const OpLabel l = comm_label(c, "sp_allgather_ring", "p2p");
  Ops out(c.ranks.size());
  for (int cp_i = 0; cp_i < cp_size(c); ++cp_i) {
    auto at = [&](int t) { return static_cast<size_t>(cp_i * tp + (t + tp) % tp); };
    Ops held(static_cast<size_t>(tp)), last(static_cast<size_t>(tp));
    for (int t = 0; t < tp; ++t) {  // chunk 0: the rank's own shard
      held[t] = deps[at(t)];
      last[t] = c.gemm(at(t), name.c_str(), m / tp, n, k, 1.0, slow, deps[at(t)]);
    }
    for (int step = 1; step < tp; ++step) {
      Ops recv(static_cast<size_t>(tp));
      for (int t = 0; t < tp; ++t) {
        // A copy-engine peer copy (TE's default use_ce), not an NCCL send/recv: NCCL's p2p
        // channel cap (platform nccl.p2p_max_bw) does not apply, its software latency does.
        recv[t] = c.g.add_transfer(c.ranks[at(t - 1)], stream::kTpSend, c.ranks[at(t)], stream::kTpRecv,
                                   c.bytes / tp, l, 0, c.topo.spec().nccl.p2p_latency_s);
        c.g.op_mut(recv[t]).interference_priced = true;
        c.g.add_edge(held[static_cast<size_t>((t - 1 + tp) % tp)], recv[t]);
      }
      for (int t = 0; t < tp; ++t)  // the compute stream keeps the chunks in order
        last[t] = c.gemm(at(t), name.c_str(), m / tp, n, k, 1.0, slow, recv[t]);
      held = recv;
    }
    for (int t = 0; t < tp; ++t) out[at(t)] = last[t];
  }
  return out;
}

/// A reduce-scatter of `bytes` in every TP group after `deps`; returns its completion per rank.
Ops reduce_scatter(TpOverlapCtx& c, const char* name, double bytes, const Ops& deps) {
  const int tp = tp_size(c);
  Ops out(c.ranks.size());
  for (int cp_i = 0; cp_i < cp_size(c); ++cp_i) {
    CollectiveRequest req;
    req.op = CollOp::ReduceScatter;
    req.bytes = bytes;
    req.send_stream = stream::kTpSend;
    req.recv_stream = stream::kTpRecv;
    req.label = comm_label(c, name, "collective");
    for (int t = 0; t < tp; ++t) {
      req.ranks.push_back(c.ranks[static_cast<size_t>(cp_i * tp + t)]);
      req.deps.push_back(deps[static_cast<size_t>(cp_i * tp + t)]);
    }
    const OpId first = static_cast<OpId>(c.g.size());
    const auto res = add_collective(c.g, c.topo, req);
    // The userbuffers kernel's SMs are priced into the GEMM it overlaps (set_sm_margin).
    for (OpId id = first; id < c.g.size(); ++id)
      if (c.g.op(id).kind == OpKind::Transfer) c.g.op_mut(id).interference_priced = true;
    for (int t = 0; t < tp; ++t) out[static_cast<size_t>(cp_i * tp + t)] = res.done[t];
  }
  return out;
}

/// One GEMM on every grid rank after deps[i].
Ops gemm_each(TpOverlapCtx& c, const std::string& name, double m, double n, double k, double slow,
              const Ops& deps) {
  Ops out(c.ranks.size());
  for (size_t i = 0; i < c.ranks.size(); ++i) out[i] = c.gemm(i, name.c_str(), m, n, k, 1.0, slow, deps[i]);
  return out;
}

}  // namespace

double ub_slowdown(const scenario::Scenario& sc, int sms) {
  const int total = sc.platform.gpu.sm_count;
  return total > sms ? static_cast<double>(total) / (total - sms) : 1.0;
}

std::vector<OpId> ag_gemm_overlap(TpOverlapCtx& c, const char* name, double m, double n, double k,
                                  const std::vector<OpId>& deps) {
  if (c.phase != Phase::Backward) return ring_exchange_gemm(c, name, m, n, k, deps);
  // The output gradient is gathered for the data gradient (TE proj_dgrad / fc2_dgrad); the
  // weight gradient reads the gathered buffer afterwards.
  const Ops dgrad = ring_exchange_gemm(c, std::string(name) + "_dgrad", m, n, k, deps);
  return gemm_each(c, std::string(name) + "_wgrad", m, n, k, 1.0, dgrad);
}

std::vector<OpId> gemm_rs_overlap(TpOverlapCtx& c, const char* name, double m, double n, double k,
                                  const std::vector<OpId>& deps) {
  if (c.phase == Phase::Backward) {
    // TE qkv_wgrad / fc1_wgrad (`bulk`): the data gradient's reduce-scatter runs beside the
    // weight-gradient GEMM, which gives the communication kernel its SMs.
    const Ops dgrad = gemm_each(c, std::string(name) + "_dgrad", m, n, k, 1.0, deps);
    const Ops done = reduce_scatter(c, "sp_reducescatter", c.bytes, dgrad);
    gemm_each(c, std::string(name) + "_wgrad", m, n, k, ub_slowdown(c.sc, kUbBulkSms), dgrad);
    return done;
  }
  // TE proj_fprop / fc2_fprop (`pipeline`): chunk s's reduce-scatter overlaps chunk s + 1's GEMM.
  const double slow = ub_slowdown(c.sc, kUbPipelineSms);
  Ops done = deps;
  Ops prev = deps;
  for (int s = 0; s < kUbPipelineSplits; ++s) {
    prev = gemm_each(c, name, m / kUbPipelineSplits, n, k, slow, prev);
    done = reduce_scatter(c, "sp_reducescatter_chunk", c.bytes / kUbPipelineSplits, prev);
  }
  return done;
}

}  // namespace cpsim::schedule
