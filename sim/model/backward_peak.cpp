// The backward's transient peak, term by term, each from the source that allocates it.
#include "model/backward_peak.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/moe.hpp"
#include "scenario/attention_kernel.hpp"
#include "scenario/enum_names.hpp"

namespace cpsim::model {

namespace {

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB", bytes / 1e9);
  return buf;
}

double round_up(double x, double unit) { return std::ceil(x / unit) * unit; }

/// The logits and the loss's buffers at their largest, on the stage that computes the loss.
MemoryTerm loss_term(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  const double tokens = static_cast<double>(tr.seq_len / p.cp) * tr.micro_batch;
  const double vocab = static_cast<double>(m.vocab) / p.tp;
  if (tr.loss == scenario::Loss::Chunked) {
    // Liger-Kernel's fused linear cross-entropy: one chunk's bf16 logits and their fp32 upcast,
    // the gradient written in place into the upcast (fused_linear_cross_entropy.py).
    const double t = std::min<double>(loss_chunk_tokens(sc), tokens);
    const double b = t * vocab * (kBf16Bytes + kFp32Bytes);
    return {"logits (one chunk, chunked loss)", b, b / 3, "training.loss: chunked"};
  }
  if (tr.stack == scenario::Stack::MegatronTe) {
    // Megatron's _VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py):
    // the bf16 logits upcast to fp32, max-subtracted and exponentiated in place, the softmax
    // kept in fp32 for the backward, which writes the gradient into it and casts it to bf16:
    // 2 + 4 B per logit forward, 4 + 2 B backward.
    const double b = tokens * vocab * (kBf16Bytes + kFp32Bytes);
    return {"logits (bf16 + fp32 softmax, gradient in place)", b, b / 3,
            "training.loss; training.stack: megatron-te (_VocabParallelCrossEntropy)"};
  }
  // PyTorch eager (torchtitan's cross_entropy_loss: pred.float() into F.cross_entropy, the bf16
  // logits deleted before loss.backward(), "need to free to before bwd to avoid peaking
  // memory"): log_softmax's fp32 output is saved (LogSoftmaxBackward0 keeps its result,
  // NllLossBackward0 the same tensor); the backward's nll_loss_backward writes a zeroed fp32
  // gradient and _log_softmax_backward_data a new fp32 one from it while both live: 12 B per
  // logit, above the forward's 10 (bf16 logits + fp32 cast + fp32 log-softmax).
  const double b = tokens * vocab * 3 * kFp32Bytes;
  return {"logits (fp32 log-softmax + nll and log-softmax gradients)", b, b / 3,
          std::string("training.loss; training.stack: ") +
              std::string(scenario::name_of(tr.stack, scenario::kStackNames)) + " (F.cross_entropy)"};
}

}  // namespace

BackwardPeak backward_peak(const scenario::Scenario& sc) {
  const auto& m = sc.model;
  const auto& p = sc.parallel;
  const auto& tr = sc.training;
  BackwardPeak out;
  out.loss = loss_term(sc);

  // The rank's tokens of one micro-batch: the sequence split by CP. Inside a block the tokens
  // are whole again under sequence parallelism (gathered before the projections), split only
  // at its input and output.
  const double tokens = static_cast<double>(tr.seq_len / p.cp) * tr.micro_batch;
  const double sp_div = p.sequence_parallel ? p.tp : 1.0;
  const bool torch_stack = tr.stack != scenario::Stack::MegatronTe;

  // Autograd holds the gradient flowing into the block (its output's) until the block's input
  // gradient, which the residual branches accumulate into, is complete: two hidden-size tensors
  // in the activation dtype.
  const double grads = 2 * tokens * m.hidden * kBf16Bytes / sp_div;
  out.block.push_back({std::string(kBlockBackwardPrefix) + "activation gradients (block output, input; bf16)",
                       grads, grads / 2, "PyTorch autograd (residual stream)"});

  const int per_stage = (m.layers + p.pp - 1) / p.pp;
  bool softmax = false;
  double ffn = 0;  // widest active MLP per token on this rank
  for (int l = 0; l < std::min(per_stage, m.layers); ++l) {
    softmax = softmax || layer_kind(m, l) == scenario::LayerKind::FullAttention;
    ffn = std::max(ffn, layer_ffn_active_params(m, l) / (3.0 * m.hidden));
  }

  // The MLP backward (SwiGLU): the gradient of w2's input and, from it, the gradients of the
  // gate and the up projection (autograd's MulBackward0 computes both while its input gradient
  // lives; TE's fused SwiGLU backward writes the [T, 2 ffn] gradient of fc1's output from the
  // [T, ffn] one): three ffn-wide bf16 tensors.
  const double ffn_rank = ffn / p.tp;
  const double mlp = 3 * tokens * ffn_rank * kBf16Bytes;
  out.mlp_bytes = mlp;

  double attn_fp32 = 0, attn_bf16 = 0;
  std::string attn_src;
  // MLA's attention backward (q/k and v of different head dims, the latent projections) is not
  // sized here: its blocks count the MLP's buffers.
  if (softmax && !m.mla) {
    const scenario::AttnImpl impl = scenario::resolve_impl(sc.cost.attention_kernel, sc.platform.gpu.arch);
    const double hq = static_cast<double>(m.heads_q) / p.tp;
    double hkv = std::max(1, m.heads_kv / p.tp);
    const double d = m.head_dim;
    // torchtitan's Llama attention repeats K and V to the query heads before SDPA (repeat_kv in
    // models/llama3/model.py): the kernel sees no GQA and returns dK, dV at every query head,
    // which the expand's backward then sums to the KV heads.
    double repeat_sum = 0;
    if (torch_stack && hkv < hq) {
      repeat_sum = 2 * tokens * hkv * d * kBf16Bytes;
      hkv = hq;
    }
    const bool gqa = hkv < hq;
    // Sequences are rounded to 128 rows and head_dim to 32 in the fp32 accumulators.
    const double rows = round_up(static_cast<double>(tr.seq_len / p.cp), 128) * tr.micro_batch;
    const double d_acc = round_up(d, 32);
    // dO (the gradient of the attention output, from wo's dgrad) and dQ, bf16.
    attn_bf16 = 2 * tokens * hq * d * kBf16Bytes + repeat_sum;
    switch (impl) {
      case scenario::AttnImpl::Fa2:
        // flash-attention csrc/flash_attn/flash_api.cpp mha_bwd (and PyTorch's in-tree copy):
        // dq_accum fp32 {b, seqlen_q_rounded, h, head_size_rounded}, softmax_d fp32
        // {b, h, seqlen_q_rounded}; under GQA dk_expanded, dv_expanded at every query head
        // beside dk, dv.
        attn_fp32 = rows * hq * (d_acc + 1) * kFp32Bytes;
        attn_bf16 += 2 * tokens * (gqa ? hq + hkv : hkv) * d * kBf16Bytes;
        attn_src = "cost.attention_kernel: fa2 (flash_api.cpp mha_bwd: fp32 dq_accum, softmax_d)";
        break;
      case scenario::AttnImpl::Fa3:
        // flash-attention hopper/flash_api.cpp mha_bwd: dq_accum fp32 {b, h, seqlen_q_rounded x
        // head_size_rounded}, softmax_lse_log2 and dsoftmax_sum fp32; under GQA dk_accum,
        // dv_accum fp32 at the KV heads.
        attn_fp32 = rows * hq * (d_acc + 2) * kFp32Bytes + (gqa ? 2 * rows * hkv * d_acc * kFp32Bytes : 0);
        attn_bf16 += 2 * tokens * hkv * d * kBf16Bytes;
        attn_src = "cost.attention_kernel: fa3 (hopper/flash_api.cpp mha_bwd: fp32 dq_accum, dk/dv_accum under GQA)";
        break;
      case scenario::AttnImpl::Cudnn:
        // cudnn-frontend's SDPA backward node: a dQ_accum and a softmax_sum workspace in fp32.
        attn_fp32 = rows * hq * (d_acc + 1) * kFp32Bytes;
        attn_bf16 += 2 * tokens * hkv * d * kBf16Bytes;
        attn_src = "cost.attention_kernel: cudnn (cudnn-frontend SDPABackwardNode: fp32 dQ_accum, softmax_sum)";
        break;
      default:
        // FlexAttention's Triton backward and the unfused path write dQ directly (the unfused
        // path's scores are a term of their own).
        attn_bf16 += 2 * tokens * hkv * d * kBf16Bytes;
        attn_src = std::string("cost.attention_kernel: ") + scenario::impl_name(impl);
        break;
    }
  }
  out.attention_bytes = attn_fp32 + attn_bf16;

  // The MLP's backward runs, then the attention's (the block's forward in reverse), each after
  // the other's buffers are freed: the larger is the block's peak.
  if (out.attention_bytes >= mlp && out.attention_bytes > 0) {
    const std::string other = "; the MLP backward's " + gb(mlp) + " is smaller";
    if (attn_fp32 > 0)
      out.block.push_back({std::string(kBlockBackwardPrefix) + "attention dQ accumulator (fp32)", attn_fp32,
                           attn_fp32, attn_src + other});
    out.block.push_back({std::string(kBlockBackwardPrefix) + "attention dO, dQ, dK, dV", attn_bf16,
                         attn_bf16 / 4, attn_src + other});
  } else {
    out.block.push_back({std::string(kBlockBackwardPrefix) + "SwiGLU gradients (3 x ffn wide, bf16)", mlp, mlp / 3,
                         "model.ffn_hidden (autograd MulBackward0; TE fused SwiGLU backward)" +
                             (out.attention_bytes > 0 ? "; the attention backward's " + gb(out.attention_bytes) + " is smaller"
                                                      : std::string())});
  }
  for (const auto& t : out.block) out.block_bytes += t.bytes;
  return out;
}

void add_backward_peak_terms(MemoryEstimate& est, const scenario::Scenario& sc, bool holds_loss,
                             double recomputing) {
  BackwardPeak bp = backward_peak(sc);
  // Both moments hold every saved activation of the stage (the loss's before the first block's
  // backward frees any, a block's after its own recomputation); they differ in these buffers,
  // and the block's holds the recomputed block's activations again beside them.
  if (recomputing > 0) {
    const auto& p = sc.parallel;
    const double tensor = static_cast<double>(sc.training.seq_len / p.cp) * sc.training.micro_batch *
                          sc.model.hidden * kBf16Bytes / (p.sequence_parallel ? p.tp : 1);
    bp.block.push_back({std::string(kBlockBackwardPrefix) + "activations of the block being recomputed",
                        recomputing, tensor,
                        std::string("training.recompute: ") +
                            std::string(scenario::name_of(sc.training.recompute, scenario::kRecomputeNames))});
    bp.block_bytes += recomputing;
  }
  if (holds_loss && bp.loss.bytes >= bp.block_bytes) {
    bp.loss.source += "; above a block's backward " + gb(bp.block_bytes);
    est.terms.push_back(bp.loss);
    return;
  }
  if (holds_loss && !bp.block.empty())
    bp.block.front().source += "; above the loss's " + gb(bp.loss.bytes);
  for (auto& t : bp.block) est.terms.push_back(std::move(t));
}

bool is_backward_peak_term(const MemoryTerm& t) {
  return t.name.rfind(kLossTermPrefix, 0) == 0 || t.name.rfind(kBlockBackwardPrefix, 0) == 0;
}

}  // namespace cpsim::model
