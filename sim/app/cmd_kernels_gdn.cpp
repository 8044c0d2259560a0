// `cpsim kernels gdn`: what the cost model charges for one Gated DeltaNet (flash-linear-attention
// chunk_gated_delta_rule) call, forward, backward or both, kernel by kernel, with the source that
// priced it; the validation cases validation/kernels/gdn-*.yaml compare it with FLA's published
// figures.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "model/cost_model.hpp"
#include "model/gdn_cost.hpp"
#include "support/safe_write.hpp"
#include "scenario/load.hpp"

namespace cpsim::app {
namespace {

struct GdnArgs {
  std::string platform, profile = "auto", direction = "fwd", part = "whole", seq_len = "8K", json;
  int seqs = 1, heads_k = 16, heads_v = 32, key_dim = 128, value_dim = 128, chunk = 64;
};

int price_gdn(const GdnArgs& a) {
  // Before any work: never the platform file it reads, never a directory or device.
  support::check_outputs({{"--json", a.json}}, {{"--platform", a.platform}});
  const scenario::PlatformSpec platform = scenario::load_platform(a.platform);
  scenario::CostSpec spec;
  if (a.profile != "auto" && a.profile != "none")
    throw std::invalid_argument("--profile: expected auto or none, got '" + a.profile + "'");
  spec.profile = a.profile;
  if (a.direction != "fwd" && a.direction != "bwd" && a.direction != "fwdbwd")
    throw std::invalid_argument("--direction: expected fwd, bwd or fwdbwd, got '" + a.direction + "'");
  model::GdnCall call;
  if (a.part == "whole") call.part = model::GdnPart::Whole;
  else if (a.part == "local") call.part = model::GdnPart::Local;
  else if (a.part == "cp-preprocess") call.part = model::GdnPart::CpPreprocess;
  else if (a.part == "recurrence") call.part = model::GdnPart::Recurrence;
  else throw std::invalid_argument("--part: expected whole, local, cp-preprocess or recurrence, got '" + a.part + "'");
  const double t = scenario::parse_tokens(a.seq_len);
  if (!(t >= 1 && t <= 1e9)) throw std::invalid_argument("--seq-len: 1 to 1G tokens");
  if (a.seqs < 1 || a.heads_k < 1 || a.heads_v < 1 || a.key_dim < 1 || a.value_dim < 1 || a.chunk < 1 ||
      a.seqs > 1000000 || a.heads_k > 1000000 || a.heads_v > 1000000 || a.key_dim > 65536 ||
      a.value_dim > 65536 || a.chunk > 65536)
    throw std::invalid_argument("--seqs, --heads-k, --heads-v, --key-dim, --value-dim, --chunk: positive and in range");
  call.seq_len = static_cast<int64_t>(t);
  call.seqs = a.seqs;
  call.heads_k = a.heads_k;
  call.heads_v = a.heads_v;
  call.key_dim = a.key_dim;
  call.value_dim = a.value_dim;
  call.chunk = a.chunk;
  const auto cost = model::CostModel::make(spec, platform.gpu);
  nlohmann::json out = {{"gpu", platform.gpu.name}, {"direction", a.direction}, {"part", a.part},
                        {"seq_len", call.seq_len}, {"seqs", call.seqs}, {"heads_k", call.heads_k},
                        {"heads_v", call.heads_v}, {"key_dim", call.key_dim},
                        {"value_dim", call.value_dim}, {"chunk", call.chunk}};
  double time = 0;
  std::string sources;
  for (const bool bwd : {false, true}) {
    if ((a.direction == "fwd" && bwd) || (a.direction == "bwd" && !bwd)) continue;
    call.backward = bwd;
    const model::Cost c = cost->gdn(call);
    time += c.time_s;
    nlohmann::json kernels = nlohmann::json::array();
    for (const model::GdnKernel& k : model::gdn_kernels(call))
      kernels.push_back({{"name", k.name}, {"flops", k.flops}, {"bytes", k.bytes}, {"sequential", k.sequential}});
    out[bwd ? "bwd" : "fwd"] = {{"time_s", c.time_s}, {"flops", c.flops},
                                {"source", model::cost_source_name(c.source)},
                                {"extrapolated", c.extrapolated}, {"kernels", kernels}};
    sources += std::string(sources.empty() ? "" : "+") + model::cost_source_name(c.source);
  }
  out["time_s"] = time;
  out["time_us"] = time * 1e6;
  out["source"] = sources;
  out["cost_model"] = cost->describe();
  std::printf("%s gdn %s %s %d x %lld tokens, %d/%d heads, d%dx%d, chunk %d: %.1f us (%s)\n",
              platform.gpu.name.c_str(), a.direction.c_str(), a.part.c_str(), call.seqs,
              static_cast<long long>(call.seq_len), call.heads_k, call.heads_v, call.key_dim,
              call.value_dim, call.chunk, time * 1e6, sources.c_str());
  if (!a.json.empty()) {
    support::write_file_atomic(a.json, out.dump(2) + "\n");  // a private temporary, renamed over
  }
  return 0;
}

}  // namespace

void register_kernels_gdn(CLI::App* kernels, int& rc) {
  auto a = std::make_shared<GdnArgs>();
  auto* sub = kernels->add_subcommand("gdn", "price one Gated DeltaNet chunk-kernel call on a platform's GPU");
  sub->add_option("--platform", a->platform, "platform preset or YAML file (its GPU is priced)")->required();
  sub->add_option("--profile", a->profile, "auto | none (auto: the bundled GDN profile; default auto)");
  sub->add_option("--direction", a->direction, "fwd | bwd | fwdbwd (default fwd)");
  sub->add_option("--part", a->part, "whole | local | cp-preprocess | recurrence (default whole)");
  sub->add_option("--seq-len", a->seq_len, "tokens per sequence, e.g. 32K (default 8K)");
  sub->add_option("--seqs", a->seqs, "sequences (default 1)");
  sub->add_option("--heads-k", a->heads_k, "query/key heads (default 16)");
  sub->add_option("--heads-v", a->heads_v, "value (state) heads (default 32)");
  sub->add_option("--key-dim", a->key_dim, "key head dim (default 128)");
  sub->add_option("--value-dim", a->value_dim, "value head dim (default 128)");
  sub->add_option("--chunk", a->chunk, "chunk size (default 64)");
  sub->add_option("--json", a->json, "write the result as JSON to this file");
  sub->callback([a, &rc] { rc = report_errors("cpsim kernels gdn", "", [&] { return price_gdn(*a); }); });
}

}  // namespace cpsim::app
