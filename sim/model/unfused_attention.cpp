// The unfused attention path (unfused_attention.hpp): the kernel sequence each framework
// launches, read from its source, with each kernel's bytes or GEMM shape.
//   Megatron-Core core/transformer/dot_product_attention.py (DotProductAttention.forward):
//     K, V repeat_interleave'd over the query heads of a group (GQA); torch.baddbmm(Q, K^T,
//     beta=0, alpha=1/sqrt(d)) into the global memory buffer; FusedScaleMaskSoftmax
//     (core/fusions/fused_softmax.py); attention_dropout (inside the CUDA RNG tracker);
//     torch.bmm(P, V). No context parallelism: its constructor asserts
//     context_parallel_size == 1 ("Context parallelism is only supported by
//     TEDotProductAttention!").
//   PyTorch aten/src/ATen/native/transformers/attention.cpp, _scaled_dot_product_attention_math:
//     query_/key/value .to(kFloat) unless allowFP16BF16ReductionMathSDP; query * sqrt(scale);
//     is_causal: ones({L, S}, kBool).tril() then convert_boolean_attn_mask (logical_not, where)
//     to a float mask; pre_process_group_query_attention_input (repeat_interleave);
//     matmul(query, key^T * sqrt(scale)); attn.add_(mask); _safe_softmax (softmax, eq(-inf),
//     all, where); dropout; matmul(attn, value).to(origin_dtype) and attn.to(origin_dtype).
// Neither skips the masked half of a causal square: the GEMMs run over all q x kv pairs.
#include "model/unfused_attention.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "log/log.hpp"


namespace cpsim::model {
namespace {

using scenario::Stack;

/// Dense FP32 (CUDA-core) over dense BF16 tensor-core peak, from the vendor datasheets: A100
/// SXM 19.5 / 312 TFLOP/s; H100 SXM 67 / 989 (H200: the same GH100 compute); L40S (Ada)
/// 91.6 / 362; HGX B200 600 / 18000 TFLOP/s per 8 GPUs (75 / 2250 per GPU). PyTorch runs the
/// math backend's FP32 matmuls without TF32 (torch.backends.cuda.matmul.allow_tf32 is False by
/// default), so cuBLAS runs SGEMM at this peak.
double fp32_over_bf16_peak(scenario::GpuArch arch) {
  switch (arch) {
    case scenario::GpuArch::Ampere: return 19.5 / 312.0;
    case scenario::GpuArch::Ada: return 91.6 / 362.0;
    case scenario::GpuArch::Hopper: return 67.0 / 989.0;
    case scenario::GpuArch::Blackwell: return 75.0 / 2250.0;
  }
  return 67.0 / 989.0;
}

// Megatron-Core FusedScaleMaskSoftmax.is_kernel_available: the CUDA kernels take keys
// 16 < sk <= 4096, sq and sk multiples of 4 and batch x heads a multiple of 4 (which also
// meets the kernels' batch_per_block of 4 for sk > 128).
bool megatron_fused_softmax(const AttentionCall& c) {
  const int64_t attn_batches = static_cast<int64_t>(c.batch) * c.heads_q;
  return c.kv_len > 16 && c.kv_len <= 4096 && c.q_len % 4 == 0 && c.kv_len % 4 == 0 && attn_batches % 4 == 0;
}

constexpr const char* kOriginMegatronFused =
    "unfused: BF16 batched GEMMs by the GEMM cost + FusedScaleMaskSoftmax at measured memory rates";
constexpr const char* kOriginMegatronTorch =
    "unfused: BF16 batched GEMMs by the GEMM cost + FP32 torch softmax at measured memory rates";
constexpr const char* kOriginInductor =
    "unfused: BF16 batched GEMMs by the GEMM cost + one Inductor softmax kernel each way at measured memory rates";
constexpr const char* kOriginTorchMath =
    "unfused: math SDPA, FP32 batched GEMMs (FP32 peak x GEMM plateau, floor the BF16 GEMM cost) + eager "
    "kernels at measured memory rates";

struct Sizes {
  double n;       ///< scores: batch x heads_q x q_len x kv_len
  double mask;    ///< one q x kv mask (broadcast over batch and heads)
  double q;       ///< elements of Q (and O, dO, dQ)
  double kv;      ///< elements of one of K, V
  double kv_exp;  ///< one of K, V expanded to the query heads
  bool gqa, masked;
};

Sizes sizes(const AttentionCall& c) {
  Sizes s;
  const double b = c.batch, sq = static_cast<double>(c.q_len), sk = static_cast<double>(c.kv_len);
  s.n = b * c.heads_q * sq * sk;
  s.mask = sq * sk;
  s.q = b * sq * c.heads_q * c.head_dim;
  s.kv = b * sk * std::max(1, c.heads_kv) * c.head_dim;
  s.kv_exp = b * sk * c.heads_q * c.head_dim;
  s.gqa = c.heads_kv > 0 && c.heads_kv < c.heads_q;
  s.masked = c.mask != scenario::Mask::Full;
  return s;
}

}  // namespace

const char* unfused_variant_name(UnfusedVariant v) {
  switch (v) {
    case UnfusedVariant::MegatronFusedSoftmax: return "Megatron DotProductAttention, fused softmax";
    case UnfusedVariant::MegatronTorchSoftmax: return "Megatron DotProductAttention, FP32 torch softmax";
    case UnfusedVariant::TorchMathFp32: return "PyTorch math SDPA (FP32)";
    case UnfusedVariant::InductorFusedSoftmax: return "torch.compile (Inductor), fused softmax chain";
  }
  return "?";
}

UnfusedVariant unfused_variant(Stack stack, const AttentionCall& c) {
  if (stack == Stack::TorchCompile) return UnfusedVariant::InductorFusedSoftmax;
  if (stack != Stack::MegatronTe) return UnfusedVariant::TorchMathFp32;
  return megatron_fused_softmax(c) ? UnfusedVariant::MegatronFusedSoftmax : UnfusedVariant::MegatronTorchSoftmax;
}

UnfusedPrice unfused_attention_price(const CostModel& gemms, const scenario::GpuSpec& gpu, Stack stack,
                                     const AttentionCall& c, double dropout_p) {
  if (!(dropout_p >= 0 && dropout_p < 1)) throw std::invalid_argument("attention dropout: expected 0 <= p < 1");
  UnfusedPrice r;
  r.variant = unfused_variant(stack, c);
  const Sizes s = sizes(c);
  const bool fp32 = r.variant == UnfusedVariant::TorchMathFp32;
  const bool dropout = dropout_p > 0;
  const double sq = static_cast<double>(c.q_len), sk = static_cast<double>(c.kv_len), d = c.head_dim;

  auto gemm = [&](const char* name, double m, double n, double k) {
    GemmCall g;
    g.m = m, g.n = n, g.k = k;
    g.batch = c.batch * c.heads_q;
    Cost cost = gemms.gemm(g);
    if (fp32) {
      // SGEMM on the CUDA cores: the FP32 peak at the GPU's measured GEMM plateau (its best
      // BF16 GEMM over its BF16 peak, the tile model's plateau), and never faster than the
      // BF16 price of the shape (its memory traffic and waves). The BF16 price's short-K
      // losses are not scaled up: they are fixed per-tile costs (prologue, epilogue), which a
      // K loop 15x slower hides.
      const double plateau = gpu.peak_flops > 0 ? gpu.gemm_flops / gpu.peak_flops : 1.0;
      const double fp32_s = 2 * m * n * k * g.batch / (gpu.peak_flops * fp32_over_bf16_peak(gpu.arch) * plateau);
      cost.time_s = std::max(cost.time_s, fp32_s);
      if (cost.source != CostSource::Roofline) cost.source = CostSource::Derived;
    }
    UnfusedPart p;
    p.name = name;
    p.gemm = true;
    p.flops = 2 * m * n * k * g.batch;
    cost.flops = p.flops;
    p.cost = cost;
    p.source = std::string(cost_source_name(cost.source)) + (cost.origin ? std::string(" (") + cost.origin + ")" : "") +
               (fp32 ? ", FP32 at the FP32 peak x GEMM plateau" : "");
    r.parts.push_back(std::move(p));
  };
  auto mem = [&](const char* name, MemClass cls, double bytes, int launches) {
    if (!(bytes > 0)) return;
    const MemKernel k{name, cls, bytes, launches};
    UnfusedPart p;
    p.name = name;
    p.bytes = bytes;
    p.cost = mem_kernels_cost({k}, gpu);
    p.source = std::string(cost_source_name(p.cost.source)) + " (" + p.cost.origin + ", " + mem_class_name(cls) + ")";
    r.parts.push_back(std::move(p));
  };

  switch (r.variant) {
    case UnfusedVariant::MegatronFusedSoftmax:
    case UnfusedVariant::MegatronTorchSoftmax: {
      const bool fused = r.variant == UnfusedVariant::MegatronFusedSoftmax;
      if (!c.backward) {
        if (s.gqa) mem("repeat_interleave K, V", MemClass::Copy, 2 * (s.kv + s.kv_exp) * 2, 2);
        gemm("baddbmm Q K^T (BF16)", sq, sk, d);
        if (fused) {
          // One read and one write of the BF16 scores; the causal mask is computed in-kernel.
          mem(s.masked ? "scaled_upper_triang_masked_softmax" : "scaled_softmax", MemClass::FusedFwd, s.n * 4, 1);
        } else {
          // forward_torch_softmax: input.float(), masked_fill_ with the cached bool mask
          // (get_default_causal_mask is lru_cache'd), nn.Softmax in FP32, .bfloat16().
          mem("scores to FP32", MemClass::Copy, s.n * 6, 1);
          if (s.masked) mem("masked_fill_", MemClass::Add, s.n * 9, 1);
          mem("softmax (FP32)", MemClass::FusedFwd, s.n * 8, 1);
          mem("probs to BF16", MemClass::Copy, s.n * 6, 1);
        }
        if (dropout) mem("attention dropout", MemClass::Add, s.n * 5, 1);
        gemm("bmm P V (BF16)", sq, d, sk);
      } else {
        gemm("dP = dO V^T (BF16)", sq, sk, d);
        gemm("dV = P^T dO (BF16)", sk, d, sq);
        if (dropout) mem("attention dropout backward", MemClass::Add, s.n * 5, 1);
        if (fused) {
          mem(s.masked ? "scaled_upper_triang_masked_softmax_bwd" : "scaled_softmax_bwd", MemClass::FusedBwd,
              s.n * 6, 1);
        } else {
          mem("probs cast backward (to FP32)", MemClass::Copy, s.n * 6, 1);
          mem("softmax backward (FP32)", MemClass::FusedBwd, s.n * 12, 1);
          if (s.masked) mem("masked_fill_ backward", MemClass::Add, s.n * 9, 1);
          mem("scores cast backward (to BF16)", MemClass::Copy, s.n * 6, 1);
        }
        gemm("dQ = dS K (BF16)", sq, d, sk);
        gemm("dK = dS^T Q (BF16)", sk, d, sq);
        if (s.gqa) mem("repeat_interleave backward (sum dK, dV)", MemClass::Add, 2 * (s.kv_exp + s.kv) * 2, 2);
      }
      break;
    }
    case UnfusedVariant::InductorFusedSoftmax:
      if (!c.backward) {
        if (s.gqa) mem("K, V expanded over the query heads", MemClass::Copy, 2 * (s.kv + s.kv_exp) * 2, 2);
        gemm("mm Q K^T (BF16, extern)", sq, sk, d);
        // BF16 scores in, BF16 probabilities out; with dropout the 1-byte mask is written too.
        mem(dropout ? "triton scale-mask-softmax-dropout" : "triton scale-mask-softmax", MemClass::FusedFwd,
            s.n * (dropout ? 5 : 4), 1);
        gemm("mm P V (BF16, extern)", sq, d, sk);
      } else {
        gemm("dP = dO V^T (BF16, extern)", sq, sk, d);
        gemm("dV = P^T dO (BF16, extern)", sk, d, sq);
        // dP and P in, dS out (and the dropout mask in).
        mem(dropout ? "triton softmax-dropout backward" : "triton softmax backward", MemClass::FusedBwd,
            s.n * (dropout ? 7 : 6), 1);
        gemm("dQ = dS K (BF16, extern)", sq, d, sk);
        gemm("dK = dS^T Q (BF16, extern)", sk, d, sq);
        if (s.gqa) mem("sum dK, dV over the query heads", MemClass::Add, 2 * (s.kv_exp + s.kv) * 2, 2);
      }
      break;
    case UnfusedVariant::TorchMathFp32:
      if (!c.backward) {
        mem("Q, K, V to FP32", MemClass::Copy, (s.q + 2 * s.kv) * 6, 3);
        mem("Q x sqrt(scale)", MemClass::Add, s.q * 8, 1);
        // ones(L, S, bool) 1 B, tril 2 B, logical_not 2 B, where to FP32 5 B per pair.
        if (s.masked) mem("causal mask build (ones, tril, logical_not, where)", MemClass::Add, s.mask * 10, 4);
        if (s.gqa) mem("repeat_interleave K, V", MemClass::Copy, 2 * (s.kv + s.kv_exp) * 4, 2);
        mem("K^T x sqrt(scale)", MemClass::Add, s.kv_exp * 8, 1);
        gemm("matmul Q K^T (FP32)", sq, sk, d);
        if (s.masked) mem("scores += mask", MemClass::Add, s.n * 12, 1);
        mem("softmax (FP32)", MemClass::FusedFwd, s.n * 8, 1);
        // _safe_softmax's rows of -inf: eq (4 B in, 1 B out), all (1 B), where (4 + 4 B).
        mem("_safe_softmax eq, all, where", MemClass::Add, s.n * 14, 3);
        if (dropout) mem("dropout (FP32)", MemClass::Add, s.n * 9, 1);
        gemm("matmul P V (FP32)", sq, d, sk);
        mem("out to BF16", MemClass::Copy, s.q * 6, 1);
        mem("attn weights to BF16 (second output)", MemClass::Copy, s.n * 6, 1);
      } else {
        mem("dO to FP32", MemClass::Copy, s.q * 6, 1);
        gemm("dP = dO V^T (FP32)", sq, sk, d);
        gemm("dV = P^T dO (FP32)", sk, d, sq);
        if (dropout) mem("dropout backward (FP32)", MemClass::Add, s.n * 9, 1);
        mem("_softmax_backward_data (FP32)", MemClass::FusedBwd, s.n * 12, 1);
        gemm("dQ = dS K (FP32)", sq, d, sk);
        gemm("dK = dS^T Q (FP32)", sk, d, sq);
        mem("scale backward (dQ, dK)", MemClass::Add, (s.q + s.kv_exp) * 8, 2);
        if (s.gqa) mem("repeat_interleave backward (sum dK, dV)", MemClass::Add, 2 * (s.kv_exp + s.kv) * 4, 2);
        mem("dQ, dK, dV to BF16", MemClass::Copy, (s.q + 2 * s.kv) * 6, 3);
      }
      break;
  }

  r.total.source = CostSource::Derived;
  r.total.origin = r.variant == UnfusedVariant::InductorFusedSoftmax ? kOriginInductor
                   : r.variant == UnfusedVariant::TorchMathFp32  ? kOriginTorchMath
                   : r.variant == UnfusedVariant::MegatronTorchSoftmax ? kOriginMegatronTorch
                                                                       : kOriginMegatronFused;
  for (const auto& p : r.parts) {
    r.total.time_s += p.cost.time_s;
    r.total.flops += p.flops;
    r.total.extrapolated = r.total.extrapolated || p.cost.extrapolated;
    if (p.cost.source == CostSource::Roofline) r.total.source = CostSource::Roofline;
  }
  return r;
}

double unfused_saved_bytes(Stack stack, const AttentionCall& c, double dropout_p) {
  const Sizes s = sizes(c);
  const bool dropout = dropout_p > 0;
  switch (unfused_variant(stack, c)) {
    case UnfusedVariant::MegatronFusedSoftmax:
    case UnfusedVariant::InductorFusedSoftmax:
      // The BF16 softmax output (its backward reads only it); with dropout also the 1-byte
      // mask and the dropped-out probabilities bmm keeps: Korthikanti et al. 2022 ("Reducing
      // Activation Recomputation in Large Transformer Models", sec. 4.1) count 2 + 1 + 2 = 5 B.
      return s.n * (dropout ? 5 : 2) + (s.gqa ? 2 * s.kv_exp * 2 : 0);
    case UnfusedVariant::MegatronTorchSoftmax:
      // nn.Softmax keeps its FP32 output, bmm the BF16 copy of it.
      return s.n * (dropout ? 9 : 6) + (s.gqa ? 2 * s.kv_exp * 2 : 0);
    case UnfusedVariant::TorchMathFp32:
      // _safe_softmax keeps its FP32 result (with dropout, the mask and the FP32 output too);
      // the matmuls keep the scaled FP32 Q, the scaled expanded K and the expanded FP32 V.
      return s.n * (dropout ? 9 : 4) + (s.q + 2 * s.kv_exp) * 4;
  }
  return 0;
}

double unfused_scores_stage_bytes(const scenario::Scenario& sc, int layers, int in_flight) {
  if (sc.cost.attention_kernel != scenario::AttnImpl::Unfused || layers <= 0 || in_flight <= 0) return 0;
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  AttentionCall c;
  // No context parallelism on this path (refused at load): the whole sequence, heads by TP.
  c.q_len = c.kv_len = tr.seq_len;
  c.mask = scenario::Mask::Causal;
  c.heads_q = std::max(1, m.heads_q / p.tp);
  c.heads_kv = std::max(1, m.heads_kv / p.tp);
  c.head_dim = m.head_dim;
  c.batch = tr.micro_batch;
  const double one = unfused_saved_bytes(sc.cost.stack, c);
  // As stage_activation_bytes: recomputed layers keep their inputs only, and the layer being
  // recomputed holds its scores until its backward. Selective recomputation is Megatron's
  // core-attention recompute (--recompute-granularity selective), made for exactly these
  // scores (Korthikanti et al. 2022, sec. 5): no layer keeps them past its forward.
  switch (tr.recompute) {
    case scenario::Recompute::Selective: return one;
    case scenario::Recompute::Full: {
      if (tr.recompute_method != scenario::TrainingSpec::RecomputeMethod::Block) return one;
      const int k = std::min(std::max(1, tr.recompute_layers), layers);
      return one * (layers - k) * in_flight + (k > 0 ? one : 0.0);
    }
    case scenario::Recompute::None: break;
  }
  const int off = std::min(tr.offload_layers, layers);
  return one * (layers - off + (off > 0 ? 1 : 0)) * in_flight;
}

UnfusedAttentionModel::UnfusedAttentionModel(std::unique_ptr<CostModel> inner, const scenario::GpuSpec& gpu,
                                             Stack stack)
    : inner_(std::move(inner)), gpu_(gpu), stack_(stack) {}

Cost UnfusedAttentionModel::attention(const AttentionCall& c) const {
  const UnfusedPrice p = unfused_attention_price(*inner_, gpu_, stack_, c);
  if (p.variant == UnfusedVariant::MegatronTorchSoftmax && log::enabled(log::Level::Info)) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "cost: unfused attention %lld x %lld, %d heads: Megatron's FusedScaleMaskSoftmax kernel refuses "
                  "the shape (16 < keys <= 4096, multiples of 4), so it runs its FP32 torch softmax",
                  static_cast<long long>(c.q_len), static_cast<long long>(c.kv_len), c.heads_q);
    log::once(log::Level::Info, buf, buf);
  }
  return p.total;
}

std::string UnfusedAttentionModel::describe() const {
  return std::string("unfused attention (") +
         (stack_ == Stack::MegatronTe ? "Megatron DotProductAttention: BF16 batched GEMMs, FusedScaleMaskSoftmax"
                                      : "PyTorch math SDPA: FP32 batched GEMMs, eager softmax") +
         ", memory kernels at h200-membound-measured.csv rates); other kernels: " + inner_->describe();
}

}  // namespace cpsim::model
