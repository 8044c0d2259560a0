#pragma once
/// CPU reference attention: the correctness oracle of every kernel variant. Straightforward
/// loops over contiguous tensors in the layouts of common/attention.hpp, in two flavours:
///   - exact (templated on float / double): every product and sum in T;
///   - naive BF16, the "same-dtype" baseline of FlashAttention's error rule: what an unfused
///     BF16 implementation (FlashAttention's attention_ref(upcast=False)) computes, every GEMM
///     output and the softmax rounded to BF16.
/// A kernel passes when |kernel - exact| <= rtol x |naive - exact| + atol (max-abs norms).
#include <cstdint>

#include "../common/attention.hpp"

namespace cpsim::kernels::reference {

/// Nearest bfloat16 (ties to even), as __float2bfloat16_rn; NaN stays NaN.
float round_bf16(float x);
/// bfloat16 bits of round_bf16(x), and back.
uint16_t to_bf16_bits(float x);
float from_bf16_bits(uint16_t bits);

/// o = softmax(scale q k^T + mask) v per head; lse as in AttnShape's comment.
template <class T>
void forward(const AttnShape& shape, const MaskSpec& mask, double scale, const T* q, const T* k,
             const T* v, T* o, T* lse);

/// Gradients of sum(o * dout) given the forward's o and lse (the kernels' contract: the
/// backward recomputes P from lse and uses D = rowsum(dout * o)). dk, dv sum over the query
/// heads that share a key/value head.
template <class T>
void backward(const AttnShape& shape, const MaskSpec& mask, double scale, const T* q, const T* k,
              const T* v, const T* o, const T* lse, const T* dout, T* dq, T* dk, T* dv);

/// Online-softmax merge of two partial results over disjoint key sets:
/// lse = log(exp(lse1) + exp(lse2)), o = o1 exp(lse1 - lse) + o2 exp(lse2 - lse); rows where both
/// are -inf give o = 0, lse = -inf. o, lse may alias o1, lse1. Shape: batch, q_len, heads_q,
/// head_dim of `shape` (kv_len, heads_kv unused).
template <class T>
void merge(const AttnShape& shape, const T* o1, const T* lse1, const T* o2, const T* lse2, T* o,
           T* lse);

/// Naive BF16 forward: s = bf16(bf16(q scale) k^T), p = bf16(softmax_fp32(s)), o = bf16(p v);
/// lse from the BF16 scores in fp32. Inputs must already be BF16 values.
void forward_bf16_naive(const AttnShape& shape, const MaskSpec& mask, double scale, const float* q,
                        const float* k, const float* v, float* o, float* lse);
/// Autograd of forward_bf16_naive with every op's output rounded to BF16.
void backward_bf16_naive(const AttnShape& shape, const MaskSpec& mask, double scale, const float* q,
                         const float* k, const float* v, const float* dout, float* dq, float* dk,
                         float* dv);

/// True if query i may see key j (batch b): the mask's definition, written out once more,
/// independently of the kernels' tile logic.
bool allowed(const AttnShape& shape, const MaskSpec& mask, int b, int i, int j);

}  // namespace cpsim::kernels::reference
