// MoE, MLA and FP8 keys -> ModelSpec / ParallelSpec / TrainingSpec, and their cross-checks.
#include "scenario/moe_keys.hpp"

#include <string>

#include "scenario/enum_names.hpp"

namespace cpsim::scenario::detail {
namespace {
std::string str(int64_t v) { return std::to_string(v); }
const Node* key_in(const Node& map, const char* key) {
  for (const auto& c : map.children)
    if (c.key == key) return &c;
  return nullptr;
}
}  // namespace

void read_moe_model(const MapReader& r, ModelSpec& m) {
  const Node* type = r.get("attention_type");
  const Node* mla = r.get("mla");
  if (type) m.mla = as_choice(*type, {"gqa", "mla"}) == 1;
  if (m.mla && !mla)
    fail_key(*type, "attention_type mla needs 'mla' {q_lora_rank, kv_lora_rank, qk_nope_head_dim, "
                    "qk_rope_head_dim, v_head_dim}");
  if (mla && !m.mla)
    fail_at(*mla, "'mla' is given but attention_type is not mla (add attention_type: mla)");
  if (m.mla) {
    MapReader a(*mla, {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    auto& d = m.mla_dims;
    if (const Node* v = a.get("q_lora_rank")) d.q_lora_rank = static_cast<int>(as_int(*v, 0, 1'000'000));
    d.kv_lora_rank = static_cast<int>(as_int(a.require("kv_lora_rank"), 1, 1'000'000));
    d.qk_nope_head_dim = static_cast<int>(as_int(a.require("qk_nope_head_dim"), 0, 65'536));
    d.qk_rope_head_dim = static_cast<int>(as_int(a.require("qk_rope_head_dim"), 0, 65'536));
    d.v_head_dim = static_cast<int>(as_int(a.require("v_head_dim"), 1, 65'536));
    const Node& qk = a.require("qk_rope_head_dim");
    if (d.qk_nope_head_dim + d.qk_rope_head_dim < 1)
      fail_at(qk, "qk_nope_head_dim + qk_rope_head_dim must be at least 1");
    if ((d.qk_nope_head_dim + d.qk_rope_head_dim + d.v_head_dim) % 2 != 0)
      fail_at(qk, "qk_nope_head_dim + qk_rope_head_dim + v_head_dim = " +
                      str(d.qk_nope_head_dim + d.qk_rope_head_dim + d.v_head_dim) +
                      " must be even (the attention kernel is priced at their mean head dim)");
    // Megatron/TE train MLA with K and V up-projected per head (no absorbed weights): the
    // kernel has heads_q K,V heads, Q.K over qk_nope + qk_rope and P.V over v_head_dim.
    // 4 x pairs x H x (qk + v) / 2 is its exact FLOP count and 2 x H x (qk + v) / 2 its K,V
    // numbers per token, so the attention and CP code see heads_kv = heads_q and that head_dim.
    if (const Node* kv = r.get("heads_kv"); kv && m.heads_kv != m.heads_q)
      fail_at(*kv, "attention_type mla up-projects K and V for every query head: heads_kv must equal heads_q " +
                       str(m.heads_q) + " (or be left out)");
    m.heads_kv = m.heads_q;
    m.head_dim = (d.qk_nope_head_dim + d.qk_rope_head_dim + d.v_head_dim) / 2;
  }

  const Node* moe = r.get("moe");
  if (!moe) return;
  MapReader e(*moe, {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_expert_ffn_hidden",
                     "first_dense_layers", "capacity_factor", "router_skew"});
  auto& s = m.moe;
  s.experts = static_cast<int>(as_int(e.require("experts"), 1, 1'000'000));
  const Node& k = e.require("top_k");
  s.top_k = static_cast<int>(as_int(k, 1, s.experts));
  s.expert_ffn_hidden = static_cast<int>(as_int(e.require("expert_ffn_hidden"), 1, 100'000'000));
  if (const Node* v = e.get("shared_experts")) s.shared_experts = static_cast<int>(as_int(*v, 0, 1'000'000));
  if (const Node* v = e.get("shared_expert_ffn_hidden"))
    s.shared_expert_ffn_hidden = static_cast<int>(as_int(*v, 0, 100'000'000));
  if (const Node* v = e.get("first_dense_layers"))
    s.first_dense_layers = static_cast<int>(as_int(*v, 0, m.layers - 1));
  if (const Node* v = e.get("capacity_factor")) {
    s.capacity_factor = as_number(*v);
    check_min(*v, s.capacity_factor, 0, true);
    if (s.capacity_factor > 0 && s.capacity_factor < 1.0 / s.experts)
      fail_at(*v, "capacity_factor must be 0 (dropless) or at least 1 / experts");
    check_max(*v, s.capacity_factor, s.experts, true);
  }
  if (const Node* v = e.get("router_skew")) {
    s.router_skew = as_number(*v);
    check_min(*v, s.router_skew, 0, true);
    check_max(*v, s.router_skew, 10, true);
  }
}

void read_moe_parallel(const MapReader& r, ParallelSpec& p) {
  if (const Node* v = r.get("ep")) p.ep = static_cast<int>(as_int(*v, 1, 1'000'000));
  if (const Node* v = r.get("expert_tp")) p.expert_tp = static_cast<int>(as_int(*v, 1, 1'000'000));
  if (const Node* v = r.get("tp_comm_overlap")) p.tp_comm_overlap = as_bool(*v);
}

void read_precision(const MapReader& r, TrainingSpec& t) {
  if (const Node* v = r.get("precision")) t.fp8 = as_choice(*v, choices(kPrecisionNames)) == 1;
  if (const Node* v = r.get("fp8_attention")) {
    t.fp8_attention = as_bool(*v);
    if (t.fp8_attention && !t.fp8)
      fail_at(*v, "fp8_attention needs training.precision: fp8");
  }
  if (const Node* v = r.get("fp8_recipe")) {
    t.fp8_recipe = static_cast<Fp8Recipe>(as_choice(*v, choices(kFp8RecipeNames)));
    if (!t.fp8) fail_at(*v, "fp8_recipe needs training.precision: fp8");
  }
  if (const Node* v = r.get("stack")) t.stack = static_cast<Stack>(as_choice(*v, choices(kStackNames)));
}

void check_moe(const Scenario& s, const Node& par, const Node& training) {
  const ParallelSpec& p = s.parallel;
  const ModelSpec& m = s.model;
  const Node& at_ep = key_in(par, "ep") ? *key_in(par, "ep") : par;
  const Node& at_etp = key_in(par, "expert_tp") ? *key_in(par, "expert_tp") : par;
  if (p.expert_tp != 1 && p.expert_tp != p.tp)
    fail_at(at_etp, "parallel.expert_tp must be 1 (experts whole on each rank, EP carved out of TP x CP x DP) "
                    "or parallel.tp = " + str(p.tp) + ", got " + str(p.expert_tp));
  if (m.moe.experts == 0 && p.ep > 1)
    fail_at(at_ep, "parallel.ep = " + str(p.ep) + " but model '" + m.name + "' has no experts (no 'moe' section)");
  if (m.moe.experts > 0) {
    const int64_t pool = int64_t{p.cp} * p.dp * (p.expert_tp == 1 ? p.tp : 1);
    const std::string pool_name = p.expert_tp == 1 ? "tp*cp*dp" : "cp*dp";
    if (pool % p.ep != 0)
      fail_at(at_ep, "parallel.ep = " + str(p.ep) + " does not divide " + pool_name + " = " + str(pool) +
                         " (expert parallelism is carved out of those ranks, as Megatron does)");
    if (m.moe.experts % p.ep != 0)
      fail_at(at_ep, "parallel.ep = " + str(p.ep) + " does not divide model '" + m.name + "' experts " +
                         str(m.moe.experts));
    if (p.tp > 1 && !p.sequence_parallel)
      fail_at(key_in(par, "sequence_parallel") ? *key_in(par, "sequence_parallel") : par,
              "a MoE model with parallel.tp > 1 needs sequence_parallel: true (Megatron requires it)");
    if (p.expert_tp > 1 && m.moe.expert_ffn_hidden % p.expert_tp != 0)
      fail_at(at_etp, "expert_ffn_hidden " + str(m.moe.expert_ffn_hidden) + " is not divisible by expert_tp " +
                          str(p.expert_tp));
  }
  // Userbuffers overlap the sequence-parallel all-gather / reduce-scatter: Megatron refuses
  // --tp-comm-overlap without --sequence-parallel (and it has nothing to overlap at tp = 1).
  if (const Node* v = key_in(par, "tp_comm_overlap"); v && p.tp_comm_overlap && (p.tp < 2 || !p.sequence_parallel))
    fail_at(*v, "true needs parallel.tp > 1 and sequence_parallel: true (got tp = " + str(p.tp) +
                    ", sequence_parallel " + (p.sequence_parallel ? "true" : "false") +
                    "; Megatron requires --sequence-parallel for --tp-comm-overlap)");
  if (s.training.fp8 && !(s.platform.gpu.fp8_gemm_flops > 0)) {
    const Node* prec = key_in(training, "precision");
    fail_at(prec ? *prec : training, "training.precision fp8 needs FP8 tensor cores, but GPU '" +
                                         s.platform.gpu.name + "' of platform '" + s.platform.name +
                                         "' has no fp8_gemm_flops (A100 and older have no FP8)");
  }
  // TransformerEngine's MXFP8 and NVFP4 recipes need sm100+ (pytorch/quantization.py
  // _compute_mxfp8_support, NVFP4BlockScaling); blockwise needs sm90+.
  const Fp8Recipe rec = s.training.fp8_recipe;
  if (s.training.fp8 && (rec == Fp8Recipe::Mxfp8 || rec == Fp8Recipe::Nvfp4) &&
      s.platform.gpu.arch != GpuArch::Blackwell) {
    fail_at(*key_in(training, "fp8_recipe"), std::string(name_of(rec, kFp8RecipeNames)) +
                                                 " needs a Blackwell GPU (TransformerEngine: sm100+), but '" +
                                                 s.platform.gpu.name + "' is " + arch_name(s.platform.gpu.arch));
  }
  if (s.training.fp8 && rec == Fp8Recipe::Blockwise && s.platform.gpu.arch != GpuArch::Hopper &&
      s.platform.gpu.arch != GpuArch::Blackwell) {
    fail_at(*key_in(training, "fp8_recipe"), "blockwise needs Hopper or Blackwell (TransformerEngine: sm90+)");
  }
}

}  // namespace cpsim::scenario::detail
