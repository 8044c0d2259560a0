#include "model/activation_checkpoint.hpp"

#include <algorithm>

#include "model/transformer.hpp"

namespace cpsim::model {

bool layer_op_sac(const scenario::Scenario& sc, int /*layer*/) {
  const auto& tr = sc.training;
  return sc.mode == scenario::Mode::Train && tr.recompute == scenario::Recompute::Selective &&
         tr.selective_ac == scenario::TrainingSpec::SelectiveAc::Op;
}

double op_sac_layer_bytes(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  // Per token of the rank's micro-batch (sequence split by CP), bf16 unless said.
  const double tokens = static_cast<double>(tr.seq_len / p.cp) * tr.micro_batch;
  const double tp = p.tp;
  const double sp_div = p.sequence_parallel ? tp : 1.0;
  const double q = static_cast<double>(m.heads_q) * m.head_dim / tp;
  const double kv = static_cast<double>(std::max(1, m.heads_kv / p.tp)) * m.head_dim;
  double per_token = kBf16Bytes * m.hidden / sp_div      // the block's input (the checkpoint's)
                     + kBf16Bytes * q                     // wq (1st mm)
                     + kBf16Bytes * kv                    // wv (3rd mm)
                     + kBf16Bytes * q + kFp32Bytes * m.heads_q / tp  // SDPA's output and LSE
                     + kBf16Bytes * m.ffn_hidden / tp     // w1 (5th mm)
                     + kBf16Bytes * m.hidden;             // w2 (7th mm), before any reduce-scatter
  // reduce_scatter_tensor is in the save list: wo's and w2's sequence-parallel outputs.
  if (p.tp > 1 && p.sequence_parallel) per_token += 2 * kBf16Bytes * m.hidden / tp;
  return per_token * tokens;
}

double recomputed_fraction(const scenario::Scenario& sc) {
  if (sc.model.layers <= 0) return 0;
  int n = 0;
  for (int l = 0; l < sc.model.layers; ++l) n += layer_recomputed(sc, l) ? 1 : 0;
  return static_cast<double>(n) / sc.model.layers;
}

bool core_attention_recomputed(const scenario::Scenario& sc, int layer) {
  const auto& tr = sc.training;
  return sc.mode == scenario::Mode::Train && tr.recompute == scenario::Recompute::Selective &&
         tr.selective_ac == scenario::TrainingSpec::SelectiveAc::CoreAttention &&
         layer_kind(sc.model, layer) == scenario::LayerKind::FullAttention;
}

}  // namespace cpsim::model
