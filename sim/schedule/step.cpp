#include "schedule/step.hpp"

#include <algorithm>
#include <memory>

#include "model/stack_kernels.hpp"
#include <stdexcept>

#include "log/log.hpp"
#include "model/transformer.hpp"
#include "schedule/collectives.hpp"
#include "schedule/grad_buckets.hpp"
#include "schedule/moe_layer.hpp"
#include "schedule/replicas.hpp"
#include "schedule/stage_builder.hpp"
#include "schedule/step_parts.hpp"

namespace cpsim::schedule {

using scenario::LayerKind;

Documents scenario_documents(const scenario::Scenario& sc) {
  const auto& t = sc.training;
  if (!t.documents.empty()) return Documents::from_lengths(t.documents);
  if (!t.doc_distribution.empty())
    return Documents::random(t.seq_len, t.doc_mean_tokens, t.doc_distribution, t.doc_seed);
  return Documents::single(t.seq_len);
}

namespace {
/// One pipeline action of a stage: forward or backward of a micro-batch on one of the stage's
/// virtual chunks (model chunk = chunk * p + stage).
struct Action {
  bool backward;
  int mb;
  int chunk;
};

/// Megatron's 1F1B order for stage s of p with m micro-batches and v virtual chunks per stage
/// (v = 1: plain 1F1B; v > 1: the interleaved schedule, which needs m divisible by p).
std::vector<Action> one_f_one_b(int s, int p, int m, int v) {
  std::vector<Action> out;
  const int total = m * v;
  auto fwd = [&](int i) {
    return Action{false, (i / (p * v)) * p + i % p, (i / p) % v};
  };
  auto bwd = [&](int i) {
    return Action{true, (i / (p * v)) * p + i % p, v - 1 - (i / p) % v};
  };
  const int warmup = v == 1 ? std::min(p - s - 1, m) : std::min((p - s - 1) * 2 + (v - 1) * p, total);
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(v == 1 ? Action{false, f, 0} : fwd(f));
  while (f < total) {
    out.push_back(v == 1 ? Action{false, f, 0} : fwd(f));
    ++f;
    out.push_back(v == 1 ? Action{true, b, 0} : bwd(b));
    ++b;
  }
  for (; b < total; ++b) out.push_back(v == 1 ? Action{true, b, 0} : bwd(b));
  return out;
}

using Ops = std::vector<OpId>;

ChunkLayout chunk_layout(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  ChunkLayout cl;
  cl.layers = sc.simulation.scope == scenario::Scope::Layer
                  ? std::min<int>(m.layers, static_cast<int>(m.pattern.size()))
                  : m.layers;
  cl.pp = sc.parallel.pp;
  cl.mbs = sc.training.micro_batches;
  cl.vs = std::max(1, sc.parallel.virtual_stages);
  cl.chunks = cl.pp * cl.vs;
  if (cl.vs > 1 && cl.mbs % cl.pp != 0)
    throw std::invalid_argument("the interleaved pipeline schedule needs micro_batches (" +
                                std::to_string(cl.mbs) + ") divisible by pp (" +
                                std::to_string(cl.pp) + ")");
  if (cl.chunks > cl.layers)
    throw std::invalid_argument("pp x virtual_stages = " + std::to_string(cl.chunks) +
                                " model chunks but only " + std::to_string(cl.layers) + " layers");
  return cl;
}

/// One data-parallel replica's pipeline: every stage's actions in Megatron's 1F1B order, built
/// in an order where every input already exists (a topological walk of the pipeline), so each
/// stage's streams receive ops in its own schedule order.
class ReplicaPipeline {
 public:
  /// `queued`: the gradient buckets queued as the backward reaches them (ZeRO-3), or null;
  /// `micro`: where every micro-batch is reduced, each micro-batch's layer backwards, or null.
  ReplicaPipeline(const StepCtx& x, const ChunkLayout& cl, int d, GatherMap& gathers,
                  MoeA2aMap& a2a, std::vector<Ops>& last_layer_bwd, QueuedGradBuckets* queued,
                  std::vector<GradsReady>* micro)
      : x_(x), cl_(cl), d_(d), last_layer_bwd_(last_layer_bwd), queued_(queued), micro_(micro),
        fwd_out_(cl.chunks, std::vector<Ops>(cl.mbs)), bwd_out_(cl.chunks, std::vector<Ops>(cl.mbs)),
        fwd_done_(cl.chunks, std::vector<bool>(cl.mbs)), bwd_done_(cl.chunks, std::vector<bool>(cl.mbs)) {
    for (int s = 0; s < cl.pp; ++s) {
      stages_.emplace_back(x.sc, x.topo, x.pricer, x.g, x.mesh, x.docs, s, d, gathers, a2a);
      stages_.back().set_param_buckets(param_buckets(x.sc, cl, s));
    }
    grid_ = stages_[0].ranks().size();
  }

  /// Builds every action; returns the full-attention layer passes built by stage 0.
  int run() {
    std::vector<std::vector<Action>> plan(cl_.pp);
    for (int s = 0; s < cl_.pp; ++s) plan[s] = one_f_one_b(s, cl_.pp, cl_.mbs, cl_.vs);
    // Prefill: the forward actions only, in the same order (a forward-only pipeline).
    if (x_.sc.mode == scenario::Mode::Prefill)
      for (auto& pl : plan)
        pl.erase(std::remove_if(pl.begin(), pl.end(), [](const Action& a) { return a.backward; }), pl.end());
    std::vector<size_t> next(cl_.pp, 0);
    size_t remaining = 0;
    for (auto& pl : plan) remaining += pl.size();
    while (remaining > 0) {
      bool progressed = false;
      for (int s = 0; s < cl_.pp; ++s)
        while (next[s] < plan[s].size() && try_action(s, plan[s][next[s]])) {
          next[s]++;
          remaining--;
          progressed = true;
        }
      if (!progressed) throw std::logic_error("pipeline schedule cannot make progress");
    }
    return stages_[0].full_layers_built;
  }

 private:
  /// Builds action `a` of stage s if its input exists; false if it must wait.
  bool try_action(int s, const Action& a) {
    const int c = a.chunk * cl_.pp + s;
    if (!a.backward) {
      if (c > 0 && !fwd_done_[c - 1][a.mb]) return false;
      forward(s, c, a.mb);
    } else {
      if (c == cl_.chunks - 1 ? !fwd_done_[c][a.mb] : !bwd_done_[c + 1][a.mb]) return false;
      backward(s, c, a.mb);
    }
    return true;
  }

  void forward(int s, int c, int mb) {
    StageBuilder& sb = stages_[s];
    const auto [l0, l1] = cl_.layers_of(c);
    Ops x = c == 0 ? sb.embedding(mb, Ops(grid_, kNoOp)) : fwd_out_[c - 1][mb];
    for (int l = l0; l < l1; ++l) x = sb.layer_forward(l, mb, x);
    if (c == cl_.chunks - 1)
      x = sb.lm_head(mb, false, x);
    else
      x = transfer(s, (c + 1) % cl_.pp, false, mb, x);
    fwd_out_[c][mb] = x;
    fwd_done_[c][mb] = true;
  }

  void backward(int s, int c, int mb) {
    StageBuilder& sb = stages_[s];
    const auto [l0, l1] = cl_.layers_of(c);
    Ops x = c == cl_.chunks - 1 ? sb.lm_head(mb, true, fwd_out_[c][mb]) : bwd_out_[c + 1][mb];
    for (int l = l1 - 1; l >= l0; --l) {
      x = sb.layer_backward(l, mb, x);  // (ZeRO-3: it queued layer l's parameter gather)
      if (queued_) queued_->queue(s);   // the buckets layer l + 1's backward made ready
      if (micro_) {
        (*micro_)[static_cast<size_t>(mb)][static_cast<size_t>(d_)][static_cast<size_t>(l)] = x;
        queued_->grads_ready(s, l, mb);
      }
      if (mb != cl_.mbs - 1) continue;
      last_layer_bwd_[l] = x;
      if (queued_ && !micro_) queued_->grads_ready(s, l, mb);
    }
    if (queued_) queued_->queue(s);
    if (c > 0) x = transfer(s, (c - 1 + cl_.pp) % cl_.pp, true, mb, x);
    bwd_out_[c][mb] = x;
    bwd_done_[c][mb] = true;
  }

  /// The activation (forward) or its gradient (backward) to the next chunk's stage.
  Ops transfer(int from, int to, bool backward, int mb, const Ops& deps) {
    if (from == to) return deps;
    const auto& p = x_.sc.parallel;
    Ops out(grid_);
    const auto& src = stages_[from].ranks();
    const auto& dst = stages_[to].ranks();
    const double bytes = static_cast<double>(x_.sc.training.seq_len / p.cp) *
                         x_.sc.training.micro_batch * x_.sc.model.hidden * model::kBf16Bytes /
                         (p.sequence_parallel ? p.tp : 1);
    for (size_t i = 0; i < grid_; ++i) {
      if (x_.g.phantom(src[i])) {  // a mirrored TP rank: its twin's (TP index 0, built first)
        out[i] = out[i - i % static_cast<size_t>(p.tp)]; continue;
      }
      OpLabel l;
      l.name = x_.g.intern(backward ? "pp_grad_p2p" : "pp_act_p2p");
      l.category = x_.g.intern("p2p");
      l.micro = mb;
      l.phase = backward ? Phase::Backward : Phase::Forward;
      // Separate streams per direction keep each queue in schedule order.
      const uint16_t ss = backward ? stream::kPpGradSend : stream::kPpSend;
      const uint16_t rs = backward ? stream::kPpGradRecv : stream::kPpRecv;
      out[i] = add_p2p(x_.g, x_.topo, src[i], dst[i], bytes, l, deps[i], ss, rs);
    }
    return out;
  }

  const StepCtx& x_;
  const ChunkLayout& cl_;
  int d_;
  std::vector<Ops>& last_layer_bwd_;
  QueuedGradBuckets* queued_;
  std::vector<GradsReady>* micro_;
  std::vector<StageBuilder> stages_;
  size_t grid_ = 0;
  /// Outputs per model chunk and micro-batch (after the p2p to the next chunk's stage).
  std::vector<std::vector<Ops>> fwd_out_, bwd_out_;
  std::vector<std::vector<bool>> fwd_done_, bwd_done_;
};

/// Model FLOPs of what was built (no recomputation) for `sequences` sequences of `layers`.
double step_model_flops(const scenario::Scenario& sc, const Documents& docs, int layers,
                        double sequences, double tokens) {
  const auto& m = sc.model;
  auto ms = m;
  ms.layers = layers;
  // Softmax layers may differ in mask (sliding entries): their mean pair count.
  double pairs = 0;
  int softmax_layers = 0;
  for (int l = 0; l < layers; ++l)
    if (model::layer_kind(m, l) == LayerKind::FullAttention) {
      pairs += static_cast<double>(total_pairs(layer_documents(m, docs, l)));
      ++softmax_layers;
    }
  pairs = softmax_layers > 0 ? pairs / softmax_layers : static_cast<double>(total_pairs(docs));
  double flops = model::model_flops_per_step(ms, sc.training.seq_len, sequences, pairs);
  if (sc.mode == scenario::Mode::Prefill)  // forward only, and the LM head for each sequence's last token
    flops = flops / 3.0 - 2.0 * m.vocab * m.hidden * (tokens - sequences);
  return flops;
}

/// The ops and edges the first built replica added: a template for the others.
struct ReplicaTemplate {
  int d = -1;
  OpId first = 0, last = 0;
  size_t edge_first = 0, edge_last = 0;
  int layers_built = 0;
  Pricer::Snapshot priced_before;
};

/// Route from -> to crosses links of the same class, bandwidth and latency as from + off -> to + off.
bool same_route(const model::Topology& topo, int from, int to, int off) {
  const auto a = topo.route(from, to), b = topo.route(from + off, to + off);
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto &la = topo.links()[a[i]], &lb = topo.links()[b[i]];
    if (la.cls != lb.cls || la.bw_Bps != lb.bw_Bps || la.latency_s != lb.latency_s) return false;
  }
  return true;
}

/// Empty when replica t.d's ops shifted by whole replicas are what building each other built
/// replica adds, op for op; otherwise why not. A replica's builders see the topology only
/// through its ranks' routes, nodes, NVLink domains and NIC rails, so the copy is exact when dp
/// is the outermost mesh dimension (replica d is GPUs [d x n, (d + 1) x n)), n is whole nodes and
/// aligned with the NVLink domains, every route the template uses has the same links (class,
/// bandwidth, latency) in the other replicas, no link or rail is perturbed, and nothing joins
/// replicas while they are built (ZeRO-3 parameter gathers and MoE all-to-alls span the DP
/// dimension; expert parallelism numbers experts by replica). The fleet noise of each copy is
/// its own: it is drawn per op at replay.
std::string why_not_copy(const StepCtx& x, const ReplicaTemplate& t, const GatherMap& gathers,
                         const MoeA2aMap& a2a, const std::vector<char>& built) {
  const auto& p = x.sc.parallel;
  const auto& spec = x.topo.spec();
  if (!x.sc.simulation.copy_replicas) return "off";
  if (p.order.back() != "dp") return "dp is not the outermost mesh dimension";
  if (!gathers.empty() || !a2a.empty() || p.ep > 1) return "replicas are joined while built";
  for (const auto& l : x.sc.perturb.links)
    if (l.bw_factor != 1 || l.add_latency_s != 0) return "a link is perturbed";
  if (!x.sc.perturb.rails_down.empty()) return "a rail is down";
  const int n = x.mesh.size() / p.dp;
  const int domain = std::max(1, spec.nvlink_domain_gpus);
  if (n % spec.gpus_per_node != 0 || (n % domain != 0 && domain % n != 0))
    return "a replica is not whole nodes aligned with the NVLink domains";
  std::vector<std::pair<int, int>> pairs;
  {
    std::vector<uint64_t> seen;
    for (OpId id = t.first; id < t.last; ++id) {
      const Op& op = x.g.op(id);
      if (op.kind == OpKind::Transfer && op.peer != op.rank)
        seen.push_back(static_cast<uint64_t>(op.rank) << 32 | static_cast<uint32_t>(op.peer));
    }
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (uint64_t k : seen) pairs.push_back({static_cast<int>(k >> 32), static_cast<int>(k & 0xffffffffu)});
  }
  for (int d = 0; d < p.dp; ++d) {
    if (!built[d] || d == t.d) continue;
    for (const auto& [a, b] : pairs)
      if (!same_route(x.topo, a, b, (d - t.d) * n)) return "replica " + std::to_string(d) + "'s routes differ";
  }
  return "";
}

/// Replica d as a copy of the template's ops, its gradients-ready ops shifted to match.
void copy_replica(const StepCtx& x, const ReplicaTemplate& t, int d, GradsReady& grads) {
  const int n = x.mesh.size() / x.sc.parallel.dp;
  const OpId base = x.g.copy_ops(t.first, t.last, t.edge_first, t.edge_last, (d - t.d) * n);
  grads[d] = grads[t.d];
  for (auto& layer : grads[d])
    for (OpId& op : layer)
      if (op != kNoOp) op = op - t.first + base;
}

/// The shortcuts a build took (or could not): one line each at info, so that `-v` says why a
/// large mesh ran in seconds, or why it did not.
void log_shortcuts(const BuildInfo& info, bool dp_lean, const ReplicaPlan& rp, int first_replica, int copies) {
  if (!log::enabled(log::Level::Info)) return;
  if (!info.symmetry.empty()) log::info("shortcut: replica symmetry " + info.symmetry);
  if (dp_lean)
    log::info("shortcut: lean graph: the GPUs of replicas not built keep only the DP collectives' ops that pace "
              "them");
  if (rp.tp_mirrored)
    log::info("shortcut: TP mirror: TP ranks 1.. of each group are timed as TP rank 0 and keep only their TP "
              "collectives");
  if (copies > 0)
    log::info("shortcut: " + std::to_string(copies) + " replica(s) copied op for op from replica " +
              std::to_string(first_replica) + " (not priced and partitioned again)");
  else if (!info.why_not_copied.empty())
    log::debug("every built replica priced on its own: " + info.why_not_copied);
}

/// Layer or step scope: every built replica's pipeline, then the gradient reduction.
BuildInfo build_step(const StepCtx& x) {
  const auto& sc = x.sc;
  const auto& p = sc.parallel;
  BuildInfo info;
  info.scope = sc.simulation.scope == scenario::Scope::Layer ? "layer" : "step";
  const ChunkLayout cl = chunk_layout(sc);
  for (int c = 0; c < p.cp; ++c) info.cp_group.push_back(x.mesh.rank_of({0, c, 0, 0}));
  GatherMap gathers;
  MoeA2aMap a2a;
  GradsReady grads(p.dp, std::vector<Ops>(cl.layers));
  ReplicaPlan rp = plan_replicas(sc, x.topo, x.mesh);
  // Lean: GPUs of replicas not built and of TP indices > 0 (tp_mirror) join collectives only.
  const bool dp_lean = sc.simulation.lean_collectives && rp.symmetric;
  rp.tp_mirrored = tp_mirror(sc, x.topo).empty();
  if (dp_lean || rp.tp_mirrored) {
    std::vector<int32_t> twin(static_cast<size_t>(x.mesh.size()), -1);
    for (int r = 0; r < x.mesh.size(); ++r) {
      auto co = x.mesh.coord_of(r);
      if (!rp.built[co[Mesh::kDp]]) {
        co[Mesh::kDp] = rp.rep;
      } else if (rp.tp_mirrored && co[Mesh::kTp] != 0) {
        co[Mesh::kTp] = 0;
      } else {
        continue;
      }
      twin[static_cast<size_t>(r)] = x.mesh.rank_of(co);
    }
    x.g.set_phantom_ranks(twin);
  } else if (rp.symmetric && sc.simulation.bystanders) {  // replicas not built (collectives.cpp)
    x.g.set_bystanders(bystanders(x.mesh, rp.built));
  }
  // ZeRO-3: the gradient buckets queued between the backward's parameter gathers as the backward
  // reaches them (QueuedGradBuckets). (Such a build copies no replica: its gathers join them.)
  // Where every micro-batch's gradients are reduced (reduces_every_micro_batch), each
  // micro-batch's layer backwards, [micro-batch][replica][layer].
  std::unique_ptr<QueuedGradBuckets> queued;
  std::vector<GradsReady> micro;
  if (reduces_every_micro_batch(sc)) micro.assign(static_cast<size_t>(cl.mbs), GradsReady(p.dp, std::vector<Ops>(cl.layers)));
  if (gathers_in_backward(sc)) {
    std::vector<std::vector<GradBuckets>> groups;
    for (int s = 0; s < cl.pp; ++s)
      groups.push_back(stage_grad_groups(x, cl, s, grads, rp, micro.empty() ? nullptr : &micro));
    queued = std::make_unique<QueuedGradBuckets>(x.g, x.topo, std::move(groups));
  }
  // The first built replica is built; the others are copies of its ops when that is exact
  // (why_not_copy): the same graph, op for op, without pricing and partitioning them again.
  ReplicaTemplate tmpl;
  std::string why_not = "no replica built yet";
  int copies = 0;
  for (int d = 0; d < p.dp; ++d) {
    if (!rp.built[d]) continue;
    if (why_not.empty()) {
      copy_replica(x, tmpl, d, grads);
      info.full_layers_built += tmpl.layers_built;
      ++copies;
      continue;
    }
    const bool first = tmpl.d < 0;
    if (first) {
      tmpl = {d, static_cast<OpId>(x.g.size()), 0, x.g.num_edges(), 0, 0, x.pricer.snapshot()};
    }
    ReplicaPipeline pipe(x, cl, d, gathers, a2a, grads[d], queued.get(), micro.empty() ? nullptr : &micro);
    const int layers = pipe.run();
    info.full_layers_built += layers;
    check_spines(x.g, x.topo, rp);  // decided once the first replica exists
    if (dp_lean && !rp.symmetric)
      throw LeanRefused("lean build refused: " + rp.why_not);
    if (first && !dp_lean) say_if_approximate(x.g, x.topo, rp, tmpl.first);
    if (first) {
      tmpl.last = static_cast<OpId>(x.g.size());
      tmpl.edge_last = x.g.num_edges();
      tmpl.layers_built = layers;
      why_not = why_not_copy(x, tmpl, gathers, a2a, rp.built);
    }
  }
  if (copies > 0) x.pricer.count_again(tmpl.priced_before, copies);
  info.replicas_copied = copies;
  if (std::count(rp.built.begin(), rp.built.end(), 1) > 1 && copies == 0) info.why_not_copied = why_not;
  if (p.dp > 1) info.symmetry = describe_symmetry(rp, p.dp);
  log_shortcuts(info, dp_lean, rp, tmpl.d, copies);
  if (queued) queued->wire();
  if (sc.mode != scenario::Mode::Prefill)  // prefill: no gradients, no optimizer
    for (int s = 0; s < cl.pp; ++s) reduce_stage(x, cl, s, grads, rp, queued.get());
  info.ranks = x.mesh.size();
  const double sequences = static_cast<double>(sc.training.micro_batch) * cl.mbs * p.dp;
  info.tokens = static_cast<double>(sc.training.seq_len) * sequences;
  info.model_flops = step_model_flops(sc, x.docs, cl.layers, sequences, info.tokens);
  return info;
}

}  // namespace

bool pipelined_collectives(const scenario::Scenario& sc) {
  const auto cm = sc.simulation.collectives;
  return cm == scenario::CollectiveModel::Pipelined ||
         (cm == scenario::CollectiveModel::Auto && Mesh(sc.parallel).size() > 512);
}

BuildInfo build_scenario(const scenario::Scenario& sc, const model::Topology& topo,
                         Pricer& pricer, TaskGraph& g) {
  const Mesh mesh(sc.parallel);
  g.set_pipelined_collectives(pipelined_collectives(sc));
  if (pipelined_collectives(sc) && log::enabled(log::Level::Info))
    log::info(std::string("shortcut: pipelined collectives (") +
              (sc.simulation.collectives == scenario::CollectiveModel::Pipelined ? "simulation.collectives: pipelined"
                                                                                 : "simulation.collectives: auto, over 512 GPUs") +
              "): each ring collective is one pipelined transfer per rank, not its n-1 steps");
  if (mesh.size() > topo.gpus())
    throw std::invalid_argument("the mesh needs " + std::to_string(mesh.size()) +
                                " GPUs but the platform has " + std::to_string(topo.gpus()));
  const Documents docs = scenario_documents(sc);
  g.set_noise(ComputeNoise(sc, topo.gpus()));
  g.set_op_limit(sc.simulation.max_ops, sc.simulation.copied_op_weight);
  if (sc.simulation.scope == scenario::Scope::AttentionLayer)
    return build_attention_layer(sc, topo, pricer, g, mesh, docs);
  return build_step(StepCtx{sc, topo, pricer, g, mesh, docs});
}

}  // namespace cpsim::schedule
