// `cpsim kernels price`: what the cost model charges for one attention kernel call on a
// platform's GPU, with which source priced it; the validation cases under validation/kernels/
// compare it with published kernel benchmarks.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "app/cli_checks.hpp"
#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "model/cost_model.hpp"
#include "model/fp8_attention.hpp"
#include "support/safe_write.hpp"
#include "scenario/load.hpp"

namespace cpsim::app {
namespace {

struct PriceArgs {
  std::string platform, impl = "auto", profile = "auto", direction = "fwd", mask = "causal", dtype = "bf16";
  std::string q = "8K", kv, json;
  int heads = 32, kv_heads = 0, head_dim = 128, batch = 1;
};

/// Unmasked pairs of a bottom-right aligned causal q x kv block (FlashAttention's causal flag).
double causal_pairs(double q, double kv) {
  if (q <= kv) return q * kv - q * (q - 1) / 2;
  return kv * (kv + 1) / 2;  // more queries than keys: the first q - kv rows see nothing
}

int price(const PriceArgs& a) {
  // Before any work: never the platform or profile file it reads, never a directory or device.
  support::check_outputs({{"--json", a.json}}, {{"--platform", a.platform}, {"--profile", a.profile}});
  const scenario::PlatformSpec platform = scenario::load_platform(a.platform);
  scenario::CostSpec spec;
  const auto impl = scenario::parse_enum<scenario::AttnImpl>(a.impl, scenario::kAttnImplNames);
  if (!impl) {
    throw std::invalid_argument("--impl: expected " + scenario::enum_choices(scenario::kAttnImplNames) +
                                ", got '" + a.impl + "'");
  }
  spec.attention_kernel = *impl;
  spec.profile = a.profile;
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
  std::string sources;
  for (const bool bwd : {false, true}) {
    if ((a.direction == "fwd" && bwd) || (a.direction == "bwd" && !bwd)) continue;
    call.backward = bwd;
    const model::Cost c = model::attention_cost(*cost, call, a.dtype == "fp8");
    time += c.time_s;
    flops += c.flops;
    out[bwd ? "bwd" : "fwd"] = {{"time_s", c.time_s},
                                {"tflops", c.time_s > 0 ? c.flops / c.time_s / 1e12 : 0},
                                {"source", model::cost_source_name(c.source)},
                                {"extrapolated", c.extrapolated}};
    sources += std::string(sources.empty() ? "" : "+") + model::cost_source_name(c.source);
  }
  out["time_s"] = time;
  out["tflops"] = time > 0 ? flops / time / 1e12 : 0;
  out["source"] = sources;
  out["cost_model"] = cost->describe();
  std::printf("%s %s %s %lldx%lld %s, %d/%d heads, d%d, batch %d: %.3f us, %.1f TFLOP/s (%s)\n",
              platform.gpu.name.c_str(), out["impl"].get<std::string>().c_str(), a.direction.c_str(),
              static_cast<long long>(call.q_len), static_cast<long long>(call.kv_len), a.mask.c_str(),
              call.heads_q, call.heads_kv, call.head_dim, call.batch, time * 1e6,
              out["tflops"].get<double>(), sources.c_str());
  if (!a.json.empty()) {
    support::write_file_atomic(a.json, out.dump(2) + "\n");  // a private temporary, renamed over
  }
  return 0;
}

}  // namespace

void register_kernels_price(CLI::App* kernels, int& rc) {
  register_kernels_gdn(kernels, rc);
  auto a = std::make_shared<PriceArgs>();
  auto* sub = kernels->add_subcommand("price", "price one attention kernel call on a platform's GPU");
  sub->add_option("--platform", a->platform, "platform preset or YAML file (its GPU is priced)")->required();
  sub->add_option("--impl", a->impl, "auto | fa2 | fa3 | cudnn | flex (default auto)");
  sub->add_option("--profile", a->profile, "auto | none | profile CSV (default auto)");
  sub->add_option("--direction", a->direction, "fwd | bwd | fwdbwd (default fwd)");
  sub->add_option("--q", a->q, "query tokens, e.g. 8K (default 8K)");
  sub->add_option("--kv", a->kv, "key tokens (default: --q)");
  sub->add_option("--mask", a->mask, "full | causal (default causal)");
  sub->add_option("--heads", a->heads, "query heads (default 32)")->check(whole_number(1, 4096));
  sub->add_option("--kv-heads", a->kv_heads, "key/value heads (default: --heads)")->check(whole_number(1, 4096));
  sub->add_option("--head-dim", a->head_dim, "head dimension (default 128)");
  sub->add_option("--batch", a->batch, "batch (default 1)");
  sub->add_option("--dtype", a->dtype, "bf16 | fp8 (TE's FP8 attention on cuDNN; default bf16)");
  sub->add_option("--json", a->json, "write the result as JSON to this file");
  sub->callback([a, &rc] { rc = report_errors("cpsim kernels price", "", [&] { return price(*a); }); });
}

}  // namespace cpsim::app
