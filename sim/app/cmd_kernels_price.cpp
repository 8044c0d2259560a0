// `cpsim kernels price`: what the cost model charges for one attention kernel call (or the
// unfused path's kernels, part by part) on a platform's GPU, with which source priced it; the validation cases under validation/kernels/
// compare it with published kernel benchmarks.
#include <algorithm>
#include <cstdio>
#include <vector>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "app/cli_checks.hpp"
#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "model/cost_model.hpp"
#include "model/fp8_attention.hpp"
#include "model/fp8_quantize.hpp"
#include "model/gemm_cost.hpp"
#include "model/host_ops.hpp"
#include "model/stack_kernels.hpp"
#include "model/unfused_attention.hpp"
#include "scenario/enum_names.hpp"
#include "support/safe_write.hpp"
#include "scenario/load.hpp"

namespace cpsim::app {
namespace {

struct PriceArgs {
  std::string platform, impl = "auto", profile = "auto", direction = "fwd", mask = "causal", dtype = "bf16";
  std::string q = "8K", kv, json;
  int heads = 32, kv_heads = 0, head_dim = 128, batch = 1;
  std::string op = "attention", layout = "TN", recipe = "delayed";
  std::string m, n, k;
  std::string stack = "megatron-te", tokens = "8K";
  int hidden = 4096, ffn = 14336;
  int experts = 8, tp = 1;
  std::string vocab = "128256";
  double attention_dropout = 0;
};

/// `--op norm | rope | residual | activation | loss | cp-merge`: the memory-bound kernels one
/// region of a layer launches under `--stack` (stack_kernels.hpp), forward or backward, over
/// --tokens tokens, with the time, bytes, achieved rate and source of each.
int price_memory(const PriceArgs& a, const scenario::PlatformSpec& platform) {
  const auto stack = scenario::parse_enum<scenario::Stack>(a.stack, scenario::kStackNames);
  if (!stack)
    throw std::invalid_argument("--stack: expected " + scenario::enum_choices(scenario::kStackNames) + ", got '" +
                                a.stack + "'");
  if (a.direction != "fwd" && a.direction != "bwd")
    throw std::invalid_argument("--direction: expected fwd or bwd for --op " + a.op + ", got '" + a.direction + "'");
  const bool bwd = a.direction == "bwd";
  const double tokens = scenario::parse_tokens(a.tokens), vocab = scenario::parse_tokens(a.vocab);
  if (!(tokens >= 1 && tokens <= 1e9) || !(vocab >= 1 && vocab <= 1e9) || a.hidden < 1 || a.ffn < 1 ||
      a.heads < 1 || a.head_dim < 1 || a.kv_heads < 0)
    throw std::invalid_argument("--tokens, --vocab: 1 to 1G; --hidden, --ffn, --heads, --head-dim: positive");
  model::LayerWidths w;
  w.tokens = tokens;
  w.hidden = a.hidden;
  w.q = static_cast<double>(a.heads) * a.head_dim;
  w.kv = static_cast<double>(a.kv_heads > 0 ? a.kv_heads : a.heads) * a.head_dim;
  w.ffn = a.ffn;
  std::vector<model::MemKernel> ks;
  using R = model::LayerRegion;
  if (a.op == "norm") ks = model::layer_kernels(*stack, R::NormAttn, bwd, w);
  else if (a.op == "rope") ks = model::layer_kernels(*stack, R::Rope, bwd, w);
  else if (a.op == "residual") ks = model::layer_kernels(*stack, R::ResidualMlp, bwd, w);
  else if (a.op == "activation") ks = model::layer_kernels(*stack, R::Activation, bwd, w);
  else if (a.op == "loss") ks = model::loss_kernels(*stack, bwd, tokens, vocab);
  else if (a.op == "cp-merge") ks = model::cp_merge_kernels(*stack, tokens, a.heads, a.head_dim);
  nlohmann::json kernels = nlohmann::json::array();
  double bytes = 0;
  for (const auto& k : ks) {
    const model::Cost c = model::mem_kernels_cost({k}, platform.gpu);
    bytes += k.bytes;
    kernels.push_back({{"kernel", k.name}, {"class", model::mem_class_name(k.cls)}, {"bytes", k.bytes},
                       {"launches", k.launches}, {"time_s", c.time_s},
                       {"gbps", c.time_s > 0 ? k.bytes / c.time_s / 1e9 : 0}});
  }
  const model::Cost total = model::mem_kernels_cost(ks, platform.gpu);
  const std::string source = std::string(model::cost_source_name(total.source)) + " (" + total.origin + ")";
  nlohmann::json out = {{"gpu", platform.gpu.name}, {"op", a.op}, {"stack", a.stack}, {"direction", a.direction},
                        {"tokens", tokens}, {"kernels", kernels}, {"bytes", bytes}, {"time_s", total.time_s},
                        {"gbps", total.time_s > 0 ? bytes / total.time_s / 1e9 : 0}, {"source", source}};
  std::printf("%s %s %s %s, %.0f tokens: %.3f us, %.3f GB, %.0f GB/s (%s)%s\n", platform.gpu.name.c_str(),
              a.stack.c_str(), a.op.c_str(), a.direction.c_str(), tokens, total.time_s * 1e6, bytes / 1e9,
              out["gbps"].get<double>(), source.c_str(), ks.empty() ? ": no kernel under this stack" : "");
  for (const auto& k : kernels)
    std::printf("  %s (%s, %d launch%s): %.3f us, %.0f GB/s\n", k["kernel"].get<std::string>().c_str(),
                k["class"].get<std::string>().c_str(), k["launches"].get<int>(),
                k["launches"].get<int>() == 1 ? "" : "es", k["time_s"].get<double>() * 1e6, k["gbps"].get<double>());
  if (!a.json.empty()) support::write_file_atomic(a.json, out.dump(2) + "\n");
  return 0;
}

/// `--op host`: the host ops one layer pass issues under `--stack` (model/host_ops.hpp), forward
/// or backward, split around the attention call, with their kinds' costs and the platform's
/// runtime (its `host_op` prices one eager op; `graphs` leaves one graph launch per pass).
int price_host(const PriceArgs& a, const scenario::PlatformSpec& platform) {
  const auto stack = scenario::parse_enum<scenario::Stack>(a.stack, scenario::kStackNames);
  if (!stack)
    throw std::invalid_argument("--stack: expected " + scenario::enum_choices(scenario::kStackNames) + ", got '" +
                                a.stack + "'");
  if (a.direction != "fwd" && a.direction != "bwd")
    throw std::invalid_argument("--direction: expected fwd or bwd for --op host, got '" + a.direction + "'");
  if (a.heads < 1 || a.head_dim < 1 || a.kv_heads < 0)
    throw std::invalid_argument("--heads, --head-dim: positive; --kv-heads: 0 (= --heads) or more");
  const bool bwd = a.direction == "bwd";
  const scenario::RuntimeSpec& rt = platform.runtime;
  model::LayerWidths w;
  w.tokens = w.hidden = w.ffn = 1;
  w.q = static_cast<double>(a.heads) * a.head_dim;
  w.kv = static_cast<double>(a.kv_heads > 0 ? a.kv_heads : a.heads) * a.head_dim;
  const model::LayerHostOps l = model::layer_host_ops(*stack, bwd, w);
  const model::HostLoad ring = model::ring_step_host(*stack, bwd);
  auto part = [&](const model::HostLoad& h) {
    return nlohmann::json{{"ops", h.ops}, {"eager_op_units", h.units}, {"time_s", model::host_seconds(h, rt)}};
  };
  const double total_s = model::host_seconds(l.total(), rt) + model::graph_launch_seconds(rt);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto k : {model::HostOpKind::EagerOp, model::HostOpKind::InductorKernel, model::HostOpKind::TritonLaunch,
                       model::HostOpKind::CudaLaunch, model::HostOpKind::CompiledCall,
                       model::HostOpKind::TeLinearFwd, model::HostOpKind::TeLinearBwd,
                       model::HostOpKind::TeLnLinearFwd, model::HostOpKind::TeLnLinearBwd})
    kinds[model::host_op_kind_name(k)] = model::host_op_units(k) * rt.host_op_s;
  nlohmann::json out = {{"gpu", platform.gpu.name}, {"op", "host"}, {"stack", a.stack}, {"direction", a.direction},
                        {"eager_op_s", rt.host_op_s}, {"graphs", rt.graphs}, {"kind_s", kinds},
                        {"before_attention", part(l.before)}, {"attention_call", part(l.attention)},
                        {"after_attention", part(l.after)}, {"ring_step", part(ring)},
                        {"ops", l.total().ops}, {"time_s", total_s}};
  // The regions outside the softmax layers (each before its first kernel in the schedule).
  if (a.experts < 1 || a.tp < 1) throw std::invalid_argument("--experts, --tp: positive");
  const model::LayerHostOps gdn = model::gdn_layer_host_ops(*stack, bwd, w);
  const model::HostLoad embed = bwd ? model::HostLoad{} : model::embedding_host_ops(*stack, a.tp);
  const model::HostLoad head = model::lm_head_host_ops(*stack, bwd, 1, a.tp);
  const model::HostLoad moe = model::moe_host_ops(*stack, bwd, a.experts, true);
  const model::HostLoad moe_loop = model::moe_host_ops(*stack, bwd, a.experts, false);
  out["gdn_layer"] = part(gdn.total());
  out["embedding"] = part(embed);
  out["lm_head_loss"] = part(head);
  out["moe_extra_grouped"] = part(moe);
  out["moe_extra_per_expert"] = part(moe_loop);
  std::printf("%s host ops of one layer pass, %s %s: %d ops, %.1f us (one eager op %.2f us%s)\n",
              platform.name.c_str(), a.stack.c_str(), a.direction.c_str(), l.total().ops, total_s * 1e6,
              rt.host_op_s * 1e6, rt.graphs ? "; CUDA graphs: one graph launch per pass" : "");
  for (const auto& [name, h] : {std::pair<const char*, const model::HostLoad*>{"before the attention call", &l.before},
                                {"the attention call", &l.attention}, {"after the attention call", &l.after},
                                {"a CP ring step after the first", &ring}})
    std::printf("  %s: %d ops, %.2f eager-op units, %.1f us\n", name, h->ops, h->units,
                model::host_seconds(*h, rt) * 1e6);
  std::printf("outside the softmax layers (--tp %d, --experts %d local):\n", a.tp, a.experts);
  const model::HostLoad gdn_total = gdn.total();
  for (const auto& [name, h] : {std::pair<const char*, const model::HostLoad*>{"a Gated DeltaNet layer pass", &gdn_total},
                                {"the embedding (forward)", &embed}, {"the LM head and loss (one chunk)", &head},
                                {"a MoE layer beyond the dense MLP, grouped GEMMs", &moe},
                                {"a MoE layer beyond the dense MLP, one GEMM call per expert", &moe_loop}})
    std::printf("  %s: %d ops, %.2f eager-op units, %.1f us\n", name, h->ops, h->units,
                model::host_seconds(*h, rt) * 1e6);
  if (!a.json.empty()) support::write_file_atomic(a.json, out.dump(2) + "\n");
  return 0;
}

/// `--op gemm`: one GEMM D[m x n] = A[m x k] B[k x n] by its cuBLAS layout (TransformerEngine's
/// fprop TN, dgrad NN, wgrad NT), dtype and FP8 recipe; with FP8, the quantisation kernels TE
/// runs for it (fprop: the input and, on a step's first micro-batch, the weight; dgrad: the
/// output gradient) are priced beside it.
int price_gemm(const PriceArgs& a, const scenario::PlatformSpec& platform, const model::CostModel& cost) {
  model::GemmCall c;
  const double m = scenario::parse_tokens(a.m), n = scenario::parse_tokens(a.n), k = scenario::parse_tokens(a.k);
  if (!(m >= 1 && n >= 1 && k >= 1 && m <= 1e9 && n <= 1e9 && k <= 1e9))
    throw std::invalid_argument("--m, --n, --k: 1 to 1G each (e.g. --m 8K --n 4096 --k 4096)");
  if (a.layout == "TN") {
    c.pass = model::GemmPass::Fprop, c.m = m, c.n = n, c.k = k;
  } else if (a.layout == "NN") {
    c.pass = model::GemmPass::Dgrad, c.m = m, c.k = n, c.n = k;
  } else if (a.layout == "NT") {
    c.pass = model::GemmPass::Wgrad, c.n = m, c.k = n, c.m = k;
  } else {
    throw std::invalid_argument("--layout: expected TN (fprop), NN (dgrad) or NT (wgrad), got '" + a.layout + "'");
  }
  if (a.dtype != "bf16" && a.dtype != "fp8")
    throw std::invalid_argument("--dtype: expected bf16 or fp8, got '" + a.dtype + "'");
  c.fp8 = a.dtype == "fp8";
  const auto recipe = scenario::parse_enum<scenario::Fp8Recipe>(a.recipe, scenario::kFp8RecipeNames);
  if (!recipe)
    throw std::invalid_argument("--recipe: expected " + scenario::enum_choices(scenario::kFp8RecipeNames) +
                                ", got '" + a.recipe + "'");
  c.recipe = *recipe;
  if (c.fp8 && !(platform.gpu.fp8_gemm_flops > 0))
    throw std::invalid_argument("--dtype fp8: GPU '" + platform.gpu.name + "' has no FP8 tensor cores");
  if (c.fp8 && (c.recipe == scenario::Fp8Recipe::Mxfp8 || c.recipe == scenario::Fp8Recipe::Nvfp4) &&
      platform.gpu.arch != scenario::GpuArch::Blackwell)
    throw std::invalid_argument("--recipe " + a.recipe + ": Blackwell GPUs only");
  const model::Cost g = cost.gemm(c);
  model::QuantNeeds needs;
  needs.weight = true;
  nlohmann::json quant = nlohmann::json::array();
  double q_time = 0;
  for (const auto& qk : model::fp8_quantize_kernels(c, needs, platform.gpu.arch)) {
    const model::Cost qc = model::mem_kernels_cost({{qk.name, model::MemClass::FusedFwd, qk.bytes, 1}}, platform.gpu);
    q_time += qc.time_s;
    quant.push_back({{"kernel", qk.name}, {"bytes", qk.bytes}, {"time_s", qc.time_s},
                     {"source", model::cost_source_name(qc.source)}, {"origin", qc.origin ? qc.origin : ""}});
  }
  const std::string source = std::string(model::cost_source_name(g.source)) + (g.origin ? std::string(" (") + g.origin + ")" : "");
  nlohmann::json out = {{"gpu", platform.gpu.name}, {"op", "gemm"}, {"m", m}, {"n", n}, {"k", k},
                        {"layout", a.layout}, {"dtype", a.dtype}, {"time_s", g.time_s},
                        {"tflops", g.time_s > 0 ? g.flops / g.time_s / 1e12 : 0}, {"source", source},
                        {"format", model::gemm_format_name(model::gemm_format(c))},
                        {"cost_model", cost.describe()}};
  if (c.fp8) {
    out["recipe"] = a.recipe;
    out["quantize"] = quant;
    out["quantize_time_s"] = q_time;
  }
  std::printf("%s GEMM %s %s %.0fx%.0fx%.0f: %.3f us, %.1f TFLOP/s (%s)\n", platform.gpu.name.c_str(),
              a.layout.c_str(), model::gemm_format_name(model::gemm_format(c)), m, n, k, g.time_s * 1e6,
              out["tflops"].get<double>(), source.c_str());
  for (const auto& q : quant)
    std::printf("  + %s %.0f B: %.3f us (%s)\n", q["kernel"].get<std::string>().c_str(), q["bytes"].get<double>(),
                q["time_s"].get<double>() * 1e6, q["source"].get<std::string>().c_str());
  if (!a.json.empty()) support::write_file_atomic(a.json, out.dump(2) + "\n");
  return 0;
}

/// Unmasked pairs of a bottom-right aligned causal q x kv block (FlashAttention's causal flag).
double causal_pairs(double q, double kv) {
  if (q <= kv) return q * kv - q * (q - 1) / 2;
  return kv * (kv + 1) / 2;  // more queries than keys: the first q - kv rows see nothing
}

int price(const PriceArgs& a) {
  // Before any work: never the platform or profile file it reads, never a directory or device.
  support::check_outputs({{"--json", a.json}}, {{"--platform", a.platform}, {"--profile", a.profile}});
  const scenario::PlatformSpec platform = scenario::load_platform(a.platform);
  static const std::vector<std::string> kMemOps = {"norm", "rope", "residual", "activation", "loss", "cp-merge"};
  const bool mem_op = std::find(kMemOps.begin(), kMemOps.end(), a.op) != kMemOps.end();
  if (a.op != "attention" && a.op != "gemm" && a.op != "host" && !mem_op)
    throw std::invalid_argument(
        "--op: expected attention, gemm, norm, rope, residual, activation, loss, cp-merge or host, got '" + a.op + "'");
  if (mem_op) return price_memory(a, platform);
  if (a.op == "host") return price_host(a, platform);
  if (a.op == "gemm") {
    scenario::CostSpec gspec;
    gspec.profile = a.profile;
    return price_gemm(a, platform, *model::CostModel::make(gspec, platform.gpu));
  }
  scenario::CostSpec spec;
  const auto impl = scenario::parse_enum<scenario::AttnImpl>(a.impl, scenario::kAttnImplNames);
  if (!impl) {
    throw std::invalid_argument("--impl: expected " + scenario::enum_choices(scenario::kAttnImplNames) +
                                ", got '" + a.impl + "'");
  }
  spec.attention_kernel = *impl;
  spec.profile = a.profile;
  const auto stack = scenario::parse_enum<scenario::Stack>(a.stack, scenario::kStackNames);
  if (!stack)
    throw std::invalid_argument("--stack: expected " + scenario::enum_choices(scenario::kStackNames) + ", got '" +
                                a.stack + "'");
  spec.stack = *stack;
  const bool unfused = *impl == scenario::AttnImpl::Unfused;
  if (unfused && a.dtype != "bf16")
    throw std::invalid_argument("--dtype fp8: FP8 attention is TransformerEngine's cuDNN kernel, not the unfused path");
  if (!(a.attention_dropout >= 0 && a.attention_dropout < 1))
    throw std::invalid_argument("--attention-dropout: expected 0 <= p < 1");
  if (a.attention_dropout > 0 && !unfused)
    throw std::invalid_argument("--attention-dropout: priced on the unfused path only (--impl unfused)");
  const auto mask = scenario::parse_mask(a.mask);
  if (!mask || (*mask != scenario::Mask::Full && *mask != scenario::Mask::Causal)) {
    throw std::invalid_argument("--mask: expected full or causal, got '" + a.mask + "'");
  }
  if (a.direction != "fwd" && a.direction != "bwd" && a.direction != "fwdbwd") {
    throw std::invalid_argument("--direction: expected fwd, bwd or fwdbwd, got '" + a.direction + "'");
  }
  if (a.dtype != "bf16" && a.dtype != "fp8")
    throw std::invalid_argument("--dtype: expected bf16 or fp8, got '" + a.dtype + "'");
  model::AttentionCall call;
  const double q = scenario::parse_tokens(a.q), kv = scenario::parse_tokens(a.kv.empty() ? a.q : a.kv);
  if (!(q >= 1 && kv >= 1 && q <= 1e9 && kv <= 1e9)) throw std::invalid_argument("--q/--kv: 1 to 1G tokens");
  if (a.heads < 1 || a.head_dim < 1 || a.batch < 1 || a.kv_heads < 0)
    throw std::invalid_argument("--heads, --head-dim, --batch: positive; --kv-heads: >= 0");
  call.q_len = static_cast<int64_t>(q);
  call.kv_len = static_cast<int64_t>(kv);
  call.mask = *mask;
  call.unmasked_fraction = *mask == scenario::Mask::Full ? 1.0 : causal_pairs(q, kv) / (q * kv);
  call.heads_q = a.heads;
  call.heads_kv = a.kv_heads > 0 ? a.kv_heads : a.heads;
  // Grouped-query attention shares each key/value head among heads/kv_heads query heads.
  if (call.heads_kv > call.heads_q || call.heads_q % call.heads_kv != 0)
    throw std::invalid_argument("--kv-heads " + std::to_string(call.heads_kv) + " must divide --heads " +
                                std::to_string(call.heads_q) + " (each key/value head serves a group of query heads)");
  call.head_dim = a.head_dim;
  call.batch = a.batch;
  const auto cost = model::CostModel::make(spec, platform.gpu);
  nlohmann::json out = {{"gpu", platform.gpu.name},
                        {"impl", scenario::impl_name(scenario::resolve_impl(*impl, platform.gpu.arch))},
                        {"direction", a.direction}, {"q_len", call.q_len}, {"kv_len", call.kv_len},
                        {"mask", a.mask}, {"heads_q", call.heads_q}, {"heads_kv", call.heads_kv},
                        {"head_dim", call.head_dim}, {"batch", call.batch}, {"dtype", a.dtype}};
  double time = 0, flops = 0;
  std::string sources, origins;
  // What set each direction's price within its source class (a profile file, the tile model,
  // the FP8 ratio's rule): each distinct one once, in direction order.
  auto add_origin = [&origins](const char* o) {
    const std::string text = o ? o : "";
    if (!text.empty() && origins.find(text) == std::string::npos) origins += (origins.empty() ? "" : " + ") + text;
  };
  for (const bool bwd : {false, true}) {
    if ((a.direction == "fwd" && bwd) || (a.direction == "bwd" && !bwd)) continue;
    call.backward = bwd;
    if (unfused) {
      // The path's kernels one by one, each with its price and what set it.
      const model::UnfusedPrice u =
          model::unfused_attention_price(*cost, platform.gpu, spec.stack, call, a.attention_dropout);
      nlohmann::json parts = nlohmann::json::array();
      for (const auto& p : u.parts) {
        const double t = p.cost.time_s;
        parts.push_back({{"kernel", p.name}, {"kind", p.gemm ? "gemm" : "memory"}, {"time_s", t},
                         {p.gemm ? "flops" : "bytes", p.gemm ? p.flops : p.bytes},
                         {p.gemm ? "tflops" : "gbps", t > 0 ? (p.gemm ? p.flops / t / 1e12 : p.bytes / t / 1e9) : 0},
                         {"source", p.source}});
      }
      time += u.total.time_s;
      flops += u.total.flops;
      out["variant"] = model::unfused_variant_name(u.variant);
      out[bwd ? "bwd" : "fwd"] = {{"time_s", u.total.time_s},
                                  {"tflops", u.total.time_s > 0 ? u.total.flops / u.total.time_s / 1e12 : 0},
                                  {"source", std::string(model::cost_source_name(u.total.source)) + " (" +
                                                 u.total.origin + ")"},
                                  {"origin", u.total.origin}, {"extrapolated", u.total.extrapolated},
                                  {"parts", parts}};
      sources += std::string(sources.empty() ? "" : "+") + model::cost_source_name(u.total.source);
      add_origin(u.total.origin);
      continue;
    }
    const model::Cost c = model::attention_cost(*cost, call, a.dtype == "fp8");
    time += c.time_s;
    flops += c.flops;
    out[bwd ? "bwd" : "fwd"] = {{"time_s", c.time_s},
                                {"tflops", c.time_s > 0 ? c.flops / c.time_s / 1e12 : 0},
                                {"source", model::cost_source_name(c.source)},
                                {"origin", c.origin ? c.origin : ""}, {"extrapolated", c.extrapolated}};
    sources += std::string(sources.empty() ? "" : "+") + model::cost_source_name(c.source);
    add_origin(c.origin);
  }
  out["time_s"] = time;
  out["tflops"] = time > 0 ? flops / time / 1e12 : 0;
  out["source"] = sources;
  out["origin"] = origins;
  out["cost_model"] = cost->describe();
  std::printf("%s %s %s %lldx%lld %s, %d/%d heads, d%d, batch %d: %.3f us, %.1f TFLOP/s (%s: %s)\n",
              platform.gpu.name.c_str(), out["impl"].get<std::string>().c_str(), a.direction.c_str(),
              static_cast<long long>(call.q_len), static_cast<long long>(call.kv_len), a.mask.c_str(),
              call.heads_q, call.heads_kv, call.head_dim, call.batch, time * 1e6,
              out["tflops"].get<double>(), sources.c_str(), origins.c_str());
  if (unfused) {
    // FLOPs performed: the whole q x kv square, whatever the mask.
    std::printf("  %s (%s stack, attention dropout %g): the full %lldx%lld scores, no masked tile skipped\n",
                out["variant"].get<std::string>().c_str(), a.stack.c_str(), a.attention_dropout,
                static_cast<long long>(call.q_len), static_cast<long long>(call.kv_len));
    for (const char* dir : {"fwd", "bwd"}) {
      if (!out.contains(dir)) continue;
      std::printf("  %s: %.3f us (%s)\n", dir, out[dir]["time_s"].get<double>() * 1e6,
                  out[dir]["source"].get<std::string>().c_str());
      for (const auto& p : out[dir]["parts"]) {
        const bool g = p["kind"] == "gemm";
        std::printf("    %s: %.3f us, %.1f %s (%s)\n", p["kernel"].get<std::string>().c_str(),
                    p["time_s"].get<double>() * 1e6, g ? p["tflops"].get<double>() : p["gbps"].get<double>(),
                    g ? "TFLOP/s" : "GB/s", p["source"].get<std::string>().c_str());
      }
    }
  }
  if (!a.json.empty()) {
    support::write_file_atomic(a.json, out.dump(2) + "\n");  // a private temporary, renamed over
  }
  return 0;
}

}  // namespace

void register_kernels_price(CLI::App* kernels, int& rc) {
  register_kernels_gdn(kernels, rc);
  auto a = std::make_shared<PriceArgs>();
  auto* sub = kernels->add_subcommand("price", "price one kernel call (attention, or --op gemm) on a platform's GPU");
  sub->add_option("--op", a->op,
                  "attention | gemm | norm | rope | residual | activation | loss | cp-merge | host (default attention)");
  sub->add_option("--stack", a->stack,
                  "memory-bound ops and --impl unfused: megatron-te | torch-eager | torch-compile (default megatron-te)");
  sub->add_option("--attention-dropout", a->attention_dropout, "--impl unfused: attention dropout probability (default 0)");
  sub->add_option("--tokens", a->tokens, "memory-bound ops: tokens (default 8K)");
  sub->add_option("--hidden", a->hidden, "norm / residual: hidden size (default 4096)");
  sub->add_option("--ffn", a->ffn, "activation: SwiGLU intermediate size (default 14336)");
  sub->add_option("--experts", a->experts, "host: a MoE layer's local experts (default 8)");
  sub->add_option("--tp", a->tp, "host: tensor-parallel size for the embedding and loss (default 1)");
  sub->add_option("--vocab", a->vocab, "loss: vocabulary (default 128256)");
  sub->add_option("--m", a->m, "gemm: rows of the output (tokens for fprop/dgrad)");
  sub->add_option("--n", a->n, "gemm: columns of the output");
  sub->add_option("--k", a->k, "gemm: the reduction dimension");
  sub->add_option("--layout", a->layout, "gemm: TN (fprop) | NN (dgrad) | NT (wgrad), cuBLAS terms (default TN)");
  sub->add_option("--recipe", a->recipe, "gemm with --dtype fp8: delayed | tensorwise | blockwise | mxfp8 | nvfp4");
  sub->add_option("--platform", a->platform, "platform preset or YAML file (its GPU is priced)")->required();
  sub->add_option("--impl", a->impl, "auto | fa2 | fa3 | cudnn | flex | unfused (default auto)");
  sub->add_option("--profile", a->profile, "auto | none | profile CSV (default auto)");
  sub->add_option("--direction", a->direction, "fwd | bwd | fwdbwd (default fwd)");
  sub->add_option("--q", a->q, "query tokens, e.g. 8K (default 8K)");
  sub->add_option("--kv", a->kv, "key tokens (default: --q)");
  sub->add_option("--mask", a->mask, "full | causal (default causal)");
  sub->add_option("--heads", a->heads, "query heads (default 32)")->check(whole_number(1, 4096));
  sub->add_option("--kv-heads", a->kv_heads, "key/value heads (default: --heads)")->check(whole_number(1, 4096));
  sub->add_option("--head-dim", a->head_dim, "head dimension (default 128)");
  sub->add_option("--batch", a->batch, "batch (default 1)");
  sub->add_option("--dtype", a->dtype, "bf16 | fp8 (attention: TE's FP8 attention on cuDNN; default bf16)");
  sub->add_option("--json", a->json, "write the result as JSON to this file");
  sub->callback([a, &rc] { rc = report_errors("cpsim kernels price", "", [&] { return price(*a); }); });
}

}  // namespace cpsim::app
