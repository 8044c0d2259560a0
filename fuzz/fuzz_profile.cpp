// Fuzz target: a kernel profile CSV through model::CostModel::from_profile, then attention
// calls across the shapes a profile can be keyed by, whose costs must be finite.
#include <cmath>

#include "harness.hpp"
#include "model/cost_model.hpp"

namespace {

cpsim::scenario::GpuSpec h100() {
  cpsim::scenario::GpuSpec g;
  g.name = "H100-SXM";
  g.peak_flops = 989e12;
  g.gemm_flops = 800e12;
  g.hbm_Bps = 3.35e12;
  g.memory_bytes = 80e9;
  return g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cpsim;
  const std::string path = fuzz::write_input("fuzz-profile.csv", data, size);
  fuzz::guarded("profile", [&] {
    const auto cost = model::CostModel::from_profile(path, h100());
    for (const int64_t len : {512, 4096, 32768, 262144})
      for (const int head_dim : {64, 128, 256})
        for (const uint8_t mask : {0, 1, 2, 3, 4})
          for (const bool bwd : {false, true}) {
            model::AttentionCall c;
            c.q_len = len;
            c.kv_len = mask == 3 ? 2 * len : len;
            c.mask = static_cast<scenario::Mask>(mask);
            c.unmasked_fraction = mask == 0 ? 1.0 : 0.5;
            c.heads_q = 32;
            c.heads_kv = 8;
            c.head_dim = head_dim;
            c.backward = bwd;
            const model::Cost r = cost->attention(c);
            fuzz::check(std::isfinite(r.time_s) && r.time_s > 0, "profile", "attention cost is not finite and positive");
          }
    cost->describe();
  });
  return 0;
}
