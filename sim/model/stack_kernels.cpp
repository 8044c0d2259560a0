// The memory-bound kernels of a layer under each stack (stack_kernels.hpp). Kernel lists from
// shared/data/stacks.md (Megatron-LM d98e8a6 + TransformerEngine d0067d0, torchtitan b5bcd76):
// section 1 (Megatron-Core + TE), 2 (torchtitan eager), 3 (torch.compile, Inductor fusion).
#include "model/stack_kernels.hpp"

#include <cstdio>
#include <string>

#include "log/log.hpp"

namespace cpsim::model {
namespace {

using scenario::Stack;

constexpr double kB = 2;  // BF16 activations

// Launch floor of one kernel on a busy stream: the project's kernel floor
// (roofline_model.cpp).
constexpr double kLaunch_s = 5e-6;

// Achieved bandwidth per class as a fraction of the GPU's measured HBM bandwidth: the H200
// timings of kernels/profiles/h200-membound-measured.csv (torch 2.11, CUDA 13.0; the largest
// shape of each op, bytes as the file counts them) over H200's measured 4.08 TB/s
// (platforms/gpus.yaml). Backward rates are the fwd+bwd row minus the fwd row.
constexpr double kH200Hbm = 4.08e12;
double fraction(MemClass c) {
  switch (c) {
    case MemClass::Copy: return 4082.3e9 / kH200Hbm;              // copy 16384x4096
    case MemClass::Add: return 4263.0e9 / kH200Hbm;               // residual_add eager 16384x4096
    case MemClass::FusedFwd: return 3260.0e9 / kH200Hbm;          // rmsnorm F.rms_norm fwd 16384x4096
    // rmsnorm F.rms_norm: (671,088,640 - 268,435,456) B in (304.557 - 82.341) us
    case MemClass::FusedBwd: return 402653184.0 / 222.216e-6 / kH200Hbm;
    case MemClass::EagerSwiglu: return 1093.9e9 / kH200Hbm;       // swiglu eager fwd 16384x28672
    // swiglu eager: (3,758,096,384 - 1,409,286,144) B in (5197.984 - 1288.352) us
    case MemClass::EagerSwigluBwd: return 2348810240.0 / 3909.632e-6 / kH200Hbm;
    case MemClass::EagerRope: return 605.2e9 / kH200Hbm;          // rope complex 16384x4096
    case MemClass::EagerCrossEntropy: return 305.5e9 / kH200Hbm;  // cross_entropy 4096x128256
    case MemClass::EagerLseMerge: return 742.0e9 / kH200Hbm;      // lse_merge 131072x128
    case MemClass::EagerSoftmax: return 432.3e9 / kH200Hbm;       // scale_mask_softmax 32768x8192 fwd
    // scale_mask_softmax 32768x8192: (2,684,354,560 - 1,073,741,824) B in (4472.352 - 2484.032) us
    case MemClass::EagerSoftmaxBwd: return 1610612736.0 / 1988.32e-6 / kH200Hbm;
  }
  return 1;
}

}  // namespace

const char* mem_class_name(MemClass c) {
  switch (c) {
    case MemClass::Copy: return "copy";
    case MemClass::Add: return "elementwise add";
    case MemClass::FusedFwd: return "fused single-pass kernel";
    case MemClass::FusedBwd: return "fused single-pass backward";
    case MemClass::EagerSwiglu: return "eager silu*mul";
    case MemClass::EagerSwigluBwd: return "eager silu*mul backward";
    case MemClass::EagerRope: return "eager complex RoPE";
    case MemClass::EagerCrossEntropy: return "eager cross-entropy";
    case MemClass::EagerLseMerge: return "eager LSE merge";
    case MemClass::EagerSoftmax: return "eager scale-mask-softmax";
    case MemClass::EagerSoftmaxBwd: return "eager softmax backward";
  }
  return "?";
}

double achieved_bandwidth(MemClass c, const scenario::GpuSpec& gpu) { return fraction(c) * gpu.hbm_Bps; }

std::vector<MemKernel> layer_kernels(Stack stack, LayerRegion region, bool backward, const LayerWidths& w) {
  const double t = w.tokens, h = w.hidden, qkv = w.q + 2 * w.kv, rope = w.q + w.kv;
  std::vector<MemKernel> ks;
  auto add = [&](const char* name, MemClass c, double bytes, int launches) {
    if (bytes > 0) ks.push_back({name, c, bytes, launches});
  };
  switch (stack) {
    case Stack::MegatronTe:
      // TE rmsnorm_fwd/bwd; TE fused RoPE (q, k); torch.compile'd bias-dropout-add and SwiGLU
      // (megatron/core/jit.py); the GQA query split is a copy; backward cats dq, dk, dv and
      // autograd adds the residual branch's gradient.
      switch (region) {
        case LayerRegion::NormAttn:
        case LayerRegion::NormMlp:
          if (!backward) add("rmsnorm", MemClass::FusedFwd, t * h * 2 * kB, 1);
          else {
            add("rmsnorm_bwd", MemClass::FusedBwd, t * h * 3 * kB, 1);
            add("residual_grad_add", MemClass::Add, t * h * 3 * kB, 1);
          }
          break;
        case LayerRegion::Rope:
          if (!backward) {
            if (w.q > w.kv) add("q_split_copy", MemClass::Copy, t * w.q * 2 * kB, 1);
            add("fused_rope", MemClass::FusedFwd, t * rope * 2 * kB, 2);
          } else {
            add("fused_rope_bwd", MemClass::FusedFwd, t * rope * 2 * kB, 2);
            add("qkv_grad_cat", MemClass::Copy, t * qkv * 2 * kB, 1);
          }
          break;
        case LayerRegion::ResidualAttn:
        case LayerRegion::ResidualMlp:
          if (!backward) add("bias_dropout_add", MemClass::Add, t * h * 3 * kB, 1);
          break;
        case LayerRegion::Activation:
          if (!backward) add("swiglu", MemClass::FusedFwd, t * w.ffn * 3 * kB, 1);
          else add("swiglu_bwd", MemClass::FusedBwd, t * w.ffn * 5 * kB, 1);
          break;
      }
      break;
    case Stack::TorchEager:
      // aten::_fused_rms_norm (F.rms_norm); three .contiguous() copies after the fused QKV
      // split; ComplexRoPE (cast, complex mul, cast per q and k); silu then mul; eager adds.
      switch (region) {
        case LayerRegion::NormAttn:
        case LayerRegion::NormMlp:
          if (!backward) add("rms_norm", MemClass::FusedFwd, t * h * 2 * kB, 1);
          else {
            add("rms_norm_bwd", MemClass::FusedBwd, t * h * 3 * kB, 1);
            add("residual_grad_add", MemClass::Add, t * h * 3 * kB, 1);
          }
          break;
        case LayerRegion::Rope:
          if (!backward) {
            add("qkv_split_copies", MemClass::Copy, t * qkv * 2 * kB, 3);
            add("rope_complex", MemClass::EagerRope, t * rope * 2 * kB, 2);
          } else {
            add("rope_complex_bwd", MemClass::EagerRope, t * rope * 2 * kB, 2);
            add("qkv_grad_cat", MemClass::Copy, t * qkv * 2 * kB, 1);
          }
          break;
        case LayerRegion::ResidualAttn:
        case LayerRegion::ResidualMlp:
          if (!backward) add("residual_add", MemClass::Add, t * h * 3 * kB, 1);
          break;
        case LayerRegion::Activation:
          if (!backward) add("silu_mul", MemClass::EagerSwiglu, t * w.ffn * 3 * kB, 1);
          else {
            add("silu_mul_bwd", MemClass::EagerSwigluBwd, t * w.ffn * 5 * kB, 1);
            // w1 and w3 are separate GEMMs: autograd sums their input gradients.
            add("w1_w3_grad_add", MemClass::Add, t * h * 3 * kB, 1);
          }
          break;
      }
      break;
    case Stack::TorchCompile:
      // Each block compiled whole (Inductor): the split copies fuse with RoPE, the residual add
      // with the next norm, silu with mul; backward chains fuse likewise.
      switch (region) {
        case LayerRegion::NormAttn:
          if (!backward) add("triton_rms_norm", MemClass::FusedFwd, t * h * 2 * kB, 1);
          else add("triton_rms_norm_bwd_add", MemClass::FusedBwd, t * h * 4 * kB, 1);
          break;
        case LayerRegion::NormMlp:
          if (backward) add("triton_rms_norm_bwd_add", MemClass::FusedBwd, t * h * 5 * kB, 1);
          break;
        case LayerRegion::Rope:
          add(backward ? "triton_rope_bwd_cat" : "triton_split_rope", MemClass::FusedFwd, t * qkv * 2 * kB, 1);
          break;
        case LayerRegion::ResidualAttn:
          if (!backward) add("triton_add_rms_norm", MemClass::FusedFwd, t * h * 4 * kB, 1);
          break;
        case LayerRegion::ResidualMlp:
          if (!backward) add("residual_add", MemClass::Add, t * h * 3 * kB, 1);
          break;
        case LayerRegion::Activation:
          if (!backward) add("triton_silu_mul", MemClass::FusedFwd, t * w.ffn * 3 * kB, 1);
          else add("triton_silu_mul_bwd", MemClass::FusedBwd, t * w.ffn * 5 * kB, 1);
          break;
      }
      break;
  }
  return ks;
}

// Megatron's _VocabParallelCrossEntropy and torchtitan's eager loss are eager ATen kernels over
// the fp32 logits (stacks.md 1, 2): the measured eager cross-entropy, 4 logical bytes per
// logit over forward and backward, half each. torch.compile compiles the loss: one fused kernel
// each way.
std::vector<MemKernel> loss_kernels(Stack stack, bool backward, double tokens, double vocab) {
  const double bytes = tokens * vocab * 2;
  if (stack == Stack::TorchCompile)
    return {{"triton_cross_entropy", backward ? MemClass::FusedBwd : MemClass::FusedFwd, bytes, 1}};
  return {{"cross_entropy", MemClass::EagerCrossEntropy, bytes, 1}};
}

// torch.distributed's _SDPAMerger.step: 8 eager elementwise kernels over the fp32 output and
// LSE; the measured lse_merge counts 10 B per output element.
std::vector<MemKernel> cp_merge_kernels(Stack stack, double tokens, double heads, double head_dim) {
  if (stack == Stack::MegatronTe) return {};
  return {{"lse_merge", MemClass::EagerLseMerge, tokens * heads * head_dim * 10, 1}};
}

Cost mem_kernels_cost(const std::vector<MemKernel>& ks, const scenario::GpuSpec& gpu) {
  Cost c;
  c.source = CostSource::Measured;
  c.origin = "h200-membound-measured.csv rates";
  for (const MemKernel& k : ks) {
    c.time_s += k.bytes / achieved_bandwidth(k.cls, gpu) + k.launches * kLaunch_s;
    // -v: which measured kernel class stands for each kernel (the table times a class's
    // representative op, not every kernel of it), once per kernel and class.
    if (log::enabled(log::Level::Info)) {
      const std::string key = std::string("memkernel ") + k.name + " " + mem_class_name(k.cls) + " " + gpu.name;
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    "cost: memory-bound %s on %s: priced at the measured %s rate (%.2f TB/s here: "
                    "H200's measured fraction of HBM bandwidth) plus %d launch floor(s)",
                    k.name, gpu.name.c_str(), mem_class_name(k.cls), achieved_bandwidth(k.cls, gpu) / 1e12,
                    k.launches);
      log::once(log::Level::Info, key, buf);
    }
  }
  return c;
}

}  // namespace cpsim::model
