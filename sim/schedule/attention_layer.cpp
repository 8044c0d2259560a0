// Scope attention-layer: one full-attention layer's forward and backward, for every TP rank's
// CP group (or the first only, SimulationSpec::one_tp_group), without the rest of the step.
#include "model/transformer.hpp"
#include "schedule/step.hpp"

namespace cpsim::schedule {

using scenario::LayerKind;

BuildInfo build_attention_layer(const scenario::Scenario& sc, const model::Topology& topo,
                                Pricer& pricer, TaskGraph& g, const Mesh& mesh,
                                const Documents& docs) {
  BuildInfo info;
  info.scope = "attention-layer";
  const auto& m = sc.model;
  int layer = 0;
  while (layer < m.layers && model::layer_kind(m, layer) != LayerKind::FullAttention) ++layer;
  const int groups = sc.simulation.one_tp_group ? 1 : sc.parallel.tp;
  for (int t = 0; t < groups; ++t) {
    AttentionCtx ctx{g, topo, pricer, sc, {}, layer, 0, {}, layer_documents(m, docs, layer)};
    for (int c = 0; c < sc.parallel.cp; ++c) ctx.group.push_back(mesh.rank_of({t, c, 0, 0}));
    if (t == 0) info.cp_group = ctx.group;
    ctx.geo.heads_q = m.heads_q / sc.parallel.tp;
    ctx.geo.heads_kv = std::max(1, m.heads_kv / sc.parallel.tp);
    ctx.geo.head_dim = m.head_dim;
    ctx.geo.batch = sc.training.micro_batch;
    const std::vector<OpId> none(ctx.group.size(), kNoOp);
    const auto fwd = attention_forward(ctx, none);
    if (sc.mode != scenario::Mode::Prefill) attention_backward(ctx, fwd);
  }
  info.ranks = sc.parallel.tp * sc.parallel.cp;
  info.full_layers_built = 1;
  // Model FLOPs of one attention layer, forward + backward (prefill: forward only).
  const double pairs =
      static_cast<double>(total_pairs(layer_documents(m, docs, layer))) * sc.training.micro_batch;
  info.model_flops = (sc.mode == scenario::Mode::Prefill ? 1.0 : 3.0) * 4.0 * pairs * m.heads_q * m.head_dim;
  info.tokens = static_cast<double>(sc.training.seq_len) * sc.training.micro_batch;
  return info;
}

}  // namespace cpsim::schedule
