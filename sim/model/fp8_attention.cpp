#include "model/fp8_attention.hpp"

namespace cpsim::model {

double fp8_attention_speedup(bool backward) {
  return backward ? kFp8BwdSpeedup : kCudnnFp8FwdTflops / kCudnnBf16FwdTflops;
}

Cost attention_cost(const CostModel& model, const AttentionCall& call, bool fp8) {
  Cost c = model.attention(call);
  if (fp8 && c.time_s > 0) {
    c.time_s /= fp8_attention_speedup(call.backward);
    // Scaled from a published ratio: never reported as a measured or published row itself.
    if (c.source != CostSource::Roofline) c.source = CostSource::Derived;
  }
  return c;
}

}  // namespace cpsim::model
