#include "model/memory.hpp"
#include "model/memory_verdict.hpp"

#include <algorithm>

#include "model/backward_peak.hpp"
#include "model/data_parallel.hpp"
#include "model/unfused_attention.hpp"

namespace cpsim::model {

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

/// Layers [begin, end) of stage k: stages hold ceil(layers / pp) layers each, as
/// estimate_memory assumes, the last one the remainder.
std::pair<int, int> stage_layers(const scenario::Scenario& sc, int k) {
  const int per = (sc.model.layers + sc.parallel.pp - 1) / sc.parallel.pp;
  const int b = std::min(sc.model.layers, k * per);
  return {b, std::min(sc.model.layers, b + per)};
}

/// Activation bytes of stage k relative to the formula estimate_memory applies to every rank
/// (stage 0's micro-batches in flight, ceil(layers / pp) layers), both by
/// stage_activation_bytes (model/transformer.hpp).
double activation_share(const scenario::Scenario& sc, int k) {
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const int per = (sc.model.layers + p.pp - 1) / p.pp;
  const auto [b, e] = stage_layers(sc, k);
  // (less the block being recomputed, counted with the backward's peak)
  const double ref = stage_activation_bytes(sc, per, std::min(p.pp, tr.micro_batches)) -
                     recomputing_activation_bytes(sc, per);
  const double mine = stage_activation_bytes(sc, e - b, std::min(p.pp - k, tr.micro_batches)) -
                      recomputing_activation_bytes(sc, e - b);
  return ref > 0 ? mine / ref : 1.0;
}

/// A term of the base estimate renamed and resized for one stage, to be priced again by the
/// allocator (finish_memory_estimate) with the same tensor size and source.
MemoryTerm resized(const MemoryTerm& t, std::string name, double bytes) {
  MemoryTerm r = t;
  r.name = std::move(name);
  r.bytes = bytes;
  r.allocated = r.reserved = 0;
  return r;
}

MemoryEstimate for_stages(const scenario::Scenario& sc, const MemoryEstimate& base, int k) {
  const auto& p = sc.parallel;
  MemoryEstimate est;
  const auto [b, e] = stage_layers(sc, k);
  int full = 0, linear = 0;
  bool peak_added = false;
  for (int i = b; i < e; ++i)
    (layer_kind(sc.model, i) == scenario::LayerKind::FullAttention ? full : linear)++;
  for (const auto& t : base.terms) {
    if (starts_with(t.name, "activations")) {
      const double act = t.bytes * activation_share(sc, k);
      // The per-layer activation formula does not depend on the token mixer (34 s b h covers
      // the projections, MLP and norms; FlashAttention and the chunked delta rule keep no
      // s x s scores), so a stage's activations split by its layer counts.
      const double n = std::max(1, full + linear);
      const std::string suffix = t.name.size() > 11 ? t.name.substr(11) : "";
      if (full > 0)
        est.terms.push_back(resized(t, "activations: full-attention layers (" + std::to_string(full) + ")" + suffix,
                                    act * full / n));
      if (linear > 0)
        est.terms.push_back(resized(t, "activations: linear-attention layers (" + std::to_string(linear) + ")" + suffix,
                                    act * linear / n));
      if (full + linear == 0) est.terms.push_back(resized(t, t.name, act));
      continue;
    }
    // The unfused path's scores: stage k's full-attention layers and micro-batches in flight.
    if (t.name == kUnfusedScoresTerm) {
      const double b = unfused_scores_stage_bytes(sc, full, std::min(p.pp - k, sc.training.micro_batches));
      if (b > 0) est.terms.push_back(resized(t, t.name, b));
      continue;
    }
    // The backward's transient peak, decided per stage where the base estimate lists it: only
    // the last stage computes the LM head and the loss.
    if (sc.mode == scenario::Mode::Train && is_backward_peak_term(t)) {
      if (!peak_added) add_backward_peak_terms(est, sc, k == p.pp - 1, recomputing_activation_bytes(sc, e - b));
      peak_added = true;
      continue;
    }
    // FSDP's gathered root: the input embedding lives on the first stage, the LM head on the
    // last (Megatron and torchtitan's pipeline split alike), so each holds half of it.
    if (starts_with(t.name, "gathered root") && p.pp > 1) {
      if (k != 0 && k != p.pp - 1) continue;
      est.terms.push_back(resized(t, k == 0 ? "gathered root (embedding; bf16)" : "gathered root (LM head; bf16)",
                                  t.bytes / 2));
      continue;
    }
    // FSDP under PP keeps every block of its stage gathered (estimate_memory counts the first
    // stage's ceil(layers / pp)): a stage with fewer layers keeps fewer.
    if (starts_with(t.name, "gathered weights") && p.pp > 1 && !fsdp_reshards(p, b, sc.model.layers)) {
      const int per = (sc.model.layers + p.pp - 1) / p.pp;
      est.terms.push_back(resized(t, "gathered weights (bf16, " + std::to_string(e - b) + " blocks kept)",
                                  t.bytes * (e - b) / std::max(1, per)));
      continue;
    }
    est.terms.push_back(t);
  }
  // Prefill runs no backward and no loss: nothing of its peak to add.
  if (!peak_added && sc.mode == scenario::Mode::Train)
    add_backward_peak_terms(est, sc, k == p.pp - 1, recomputing_activation_bytes(sc, e - b));
  finish_memory_estimate(est, sc);
  return est;
}

}  // namespace

std::vector<RankClassMemory> memory_by_rank_class(const scenario::Scenario& sc) {
  const MemoryEstimate base = estimate_memory(sc);
  const int pp = std::max(1, sc.parallel.pp);
  std::vector<RankClassMemory> out;
  if (pp == 1) {
    out.push_back({"every rank", 0, 0, for_stages(sc, base, 0)});
    return out;
  }
  out.push_back({"first stage (pp 0)", 0, 0, for_stages(sc, base, 0)});
  // Middle stages differ only in micro-batches in flight; the second stage holds the most.
  if (pp > 2)
    out.push_back({"middle stages (pp 1-" + std::to_string(pp - 2) + ")", 1, pp - 2,
                   for_stages(sc, base, 1)});
  out.push_back({"last stage (pp " + std::to_string(pp - 1) + ")", pp - 1, pp - 1,
                 for_stages(sc, base, pp - 1)});
  return out;
}

MemoryEstimate peak_rank_memory(const scenario::Scenario& sc) {
  const auto classes = memory_by_rank_class(sc);
  const RankClassMemory* best = &classes.front();
  for (const auto& c : classes)
    if (c.memory.peak_bytes > best->memory.peak_bytes) best = &c;
  MemoryEstimate m = best->memory;
  if (classes.size() > 1) m.verdict += " (" + best->name + ")";
  return m;
}

MemoryEstimate simulated_memory(const scenario::Scenario& sc) {
  return sc.simulation.scope == scenario::Scope::AttentionLayer ? attention_layer_memory(sc) : peak_rank_memory(sc);
}

}  // namespace cpsim::model
