#include "model/fp8_attention.hpp"

namespace cpsim::model {

double fp8_attention_speedup(bool backward) {
  return backward ? kFp8BwdSpeedup : kCudnnFp8FwdTflops / kCudnnBf16FwdTflops;
}

Cost attention_cost(const CostModel& model, const AttentionCall& call, bool fp8) {
  Cost c = model.attention(call);
  if (fp8 && c.time_s > 0) {
    const auto own = model.fp8_attention_ratio(call);
    c.time_s /= own ? own->speedup : fp8_attention_speedup(call.backward);
    c.origin = own ? own->origin : kFp8RuleOrigin;
    // Scaled from a published ratio: never reported as a measured or published row itself.
    if (c.source != CostSource::Roofline) c.source = CostSource::Derived;
  }
  return c;
}

}  // namespace cpsim::model
