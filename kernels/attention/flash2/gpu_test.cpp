// flash2 on the GPU against the CPU reference, with FlashAttention's error rule. Every test
// skips when no CUDA device is visible (label `gpu`).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention/common/testing.hpp"
#include "attention/flash2/cuda.hpp"

using namespace cpsim::kernels;
namespace ts = cpsim::kernels::test_support;

namespace {

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    const cudaError_t err_ = (expr);                                           \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/// Device buffer of T.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    void* raw = nullptr;
    if (n_ && cudaMalloc(&raw, n_ * sizeof(T)) == cudaSuccess) p_ = static_cast<T*>(raw);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  T* get() const { return p_; }
  void upload(const std::vector<T>& host) {
    if (!host.empty()) cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> download() const {
    std::vector<T> h(n_);
    if (n_) cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

class Flash2Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
  }
};

struct GpuCase {
  const char* name;
  AttnShape shape;
  MaskKind mask;
  int64_t q_offset, k_offset;
  int doc_len;
};
std::ostream& operator<<(std::ostream& os, const GpuCase& c) { return os << c.name; }

class Flash2GpuCases : public ::testing::TestWithParam<GpuCase> {
 protected:
  void SetUp() override {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
  }
};

struct GpuRun {
  std::vector<float> o, lse, dq, dk, dv;
};

/// Runs flash2 forward then backward (on the forward's own o and lse) on the device.
void run_gpu(const ts::Problem& p, GpuRun& out, int kv_split = 0) {
  const AttnShape& s = p.shape;
  DeviceBuffer<uint16_t> q(ts::to_bits(p.q)), k(ts::to_bits(p.k)), v(ts::to_bits(p.v)),
      dout(ts::to_bits(p.dout));
  DeviceBuffer<uint16_t> o(p.q_elems()), dq(p.q_elems()), dk(p.kv_elems()), dv(p.kv_elems());
  DeviceBuffer<float> lse(p.lse_elems());
  DeviceBuffer<int32_t> qdoc(p.q_doc), kdoc(p.k_doc);
  DeviceBuffer<char> ws(flash2::backward_workspace_bytes(s));
  MaskSpec mask = p.mask();
  if (mask.q_doc) {
    mask.q_doc = qdoc.get();
    mask.k_doc = kdoc.get();
  }
  flash2::ForwardArgs fa;
  fa.shape = s;
  fa.mask = mask;
  fa.scale = static_cast<float>(p.scale);
  fa.q = flash2::contiguous(q.get(), s.q_len, s.heads_q, s.head_dim);
  fa.k = flash2::contiguous(k.get(), s.kv_len, s.heads_kv, s.head_dim);
  fa.v = flash2::contiguous(v.get(), s.kv_len, s.heads_kv, s.head_dim);
  fa.o = flash2::contiguous(o.get(), s.q_len, s.heads_q, s.head_dim);
  fa.lse = lse.get();
  CUDA_OK(flash2::forward(fa));
  flash2::BackwardArgs ba;
  ba.shape = s;
  ba.mask = mask;
  ba.scale = fa.scale;
  ba.q = fa.q;
  ba.k = fa.k;
  ba.v = fa.v;
  ba.o = fa.o;
  ba.dout = flash2::contiguous(dout.get(), s.q_len, s.heads_q, s.head_dim);
  ba.dq = flash2::contiguous(dq.get(), s.q_len, s.heads_q, s.head_dim);
  ba.dk = flash2::contiguous(dk.get(), s.kv_len, s.heads_kv, s.head_dim);
  ba.dv = flash2::contiguous(dv.get(), s.kv_len, s.heads_kv, s.head_dim);
  ba.lse = lse.get();
  ba.workspace = ws.get();
  ba.kv_split = kv_split;
  CUDA_OK(flash2::backward(ba));
  CUDA_OK(cudaDeviceSynchronize());
  out.o = ts::from_bits(o.download());
  out.lse = lse.download();
  out.dq = ts::from_bits(dq.download());
  out.dk = ts::from_bits(dk.download());
  out.dv = ts::from_bits(dv.download());
}

TEST_P(Flash2GpuCases, ForwardAndBackwardMatchReference) {
  const GpuCase& c = GetParam();
  BenchShape args;
  args.q_offset = c.q_offset;
  args.k_offset = c.k_offset;
  args.doc_len = c.doc_len;
  const ts::Problem p = ts::make_problem(c.shape, c.mask, args, 99);
  GpuRun r;
  ASSERT_NO_FATAL_FAILURE(run_gpu(p, r));
  const ts::Oracle ref = ts::make_oracle(p, true);
  EXPECT_TRUE(ts::flash_rule("o", r.o, ref.o, ref.o_naive));
  EXPECT_TRUE(ts::flash_rule("lse", r.lse, ref.lse, ref.lse_naive, 2.0, 1e-4));
  EXPECT_TRUE(ts::flash_rule("dq", r.dq, ref.dq, ref.dq_naive));
  EXPECT_TRUE(ts::flash_rule("dk", r.dk, ref.dk, ref.dk_naive));
  EXPECT_TRUE(ts::flash_rule("dv", r.dv, ref.dv, ref.dv_naive));
}

// Every head dim x every mask kind, ragged and aligned lengths, GQA; one longer case. Sizes
// keep the CPU reference (the slow side) to about a minute for the whole suite.
const GpuCase kCases[] = {
    {"d64_full", {2, 257, 383, 4, 2, 64}, MaskKind::Full, 0, 0, 0},
    {"d64_causal", {1, 384, 384, 4, 4, 64}, MaskKind::Causal, 0, 0, 0},
    {"d64_causal_offset", {1, 200, 333, 4, 1, 64}, MaskKind::CausalOffset, 133, 0, 0},
    {"d64_document", {1, 512, 512, 2, 1, 64}, MaskKind::Document, 0, 0, 100},
    {"d128_full", {1, 300, 200, 4, 2, 128}, MaskKind::Full, 0, 0, 0},
    {"d128_causal", {1, 320, 320, 2, 2, 128}, MaskKind::Causal, 0, 0, 0},
    {"d128_causal_offset_empty_rows", {1, 256, 256, 2, 1, 128}, MaskKind::CausalOffset, 0, 64, 0},
    {"d128_document_ragged", {2, 300, 300, 2, 1, 128}, MaskKind::Document, 0, 0, 77},
    {"d128_causal_long", {1, 2048, 2048, 2, 1, 128}, MaskKind::Causal, 0, 0, 0},
    {"d256_full_gqa6", {1, 192, 256, 6, 1, 256}, MaskKind::Full, 0, 0, 0},
    {"d256_causal", {1, 300, 300, 2, 1, 256}, MaskKind::Causal, 0, 0, 0},
    {"d256_causal_offset", {1, 128, 384, 2, 2, 256}, MaskKind::CausalOffset, 256, 0, 0},
    {"d256_document", {1, 384, 384, 2, 1, 256}, MaskKind::Document, 0, 0, 128},
};
INSTANTIATE_TEST_SUITE_P(Cases, Flash2GpuCases, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// GQA backward both ways: the whole group in one CTA, and split over CTAs (dK, dV by atomics).
TEST_F(Flash2Gpu, GqaBackwardWithAndWithoutSplit) {
  const ts::Problem p =
      ts::make_problem(AttnShape{1, 256, 384, 6, 1, 128}, MaskKind::Causal, BenchShape{}, 21);
  const ts::Oracle ref = ts::make_oracle(p, true);
  for (int split : {1, 2, 6}) {
    GpuRun r;
    ASSERT_NO_FATAL_FAILURE(run_gpu(p, r, split));
    EXPECT_TRUE(ts::flash_rule("dk split " + std::to_string(split), r.dk, ref.dk, ref.dk_naive));
    EXPECT_TRUE(ts::flash_rule("dv split " + std::to_string(split), r.dv, ref.dv, ref.dv_naive));
    EXPECT_TRUE(ts::flash_rule("dq split " + std::to_string(split), r.dq, ref.dq, ref.dq_naive));
  }
}

// Strided views: Q, K, V packed in one [batch, len, 3, heads, dim] tensor, as a fused QKV
// projection leaves them.
TEST_F(Flash2Gpu, PackedQkvStridesMatchContiguous) {
  const AttnShape s{2, 200, 200, 2, 2, 128};
  const ts::Problem p = ts::make_problem(s, MaskKind::Causal, BenchShape{}, 5);
  const int64_t row = 3LL * s.heads_q * s.head_dim;
  std::vector<uint16_t> packed(static_cast<size_t>(s.batch) * s.q_len * row);
  const auto qb = ts::to_bits(p.q), kb = ts::to_bits(p.k), vb = ts::to_bits(p.v);
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.q_len; ++i)
      for (int e = 0; e < s.heads_q * s.head_dim; ++e) {
        const size_t src = (static_cast<size_t>(b) * s.q_len + i) * s.heads_q * s.head_dim + e;
        const size_t dst = (static_cast<size_t>(b) * s.q_len + i) * row;
        packed[dst + e] = qb[src];
        packed[dst + s.heads_q * s.head_dim + e] = kb[src];
        packed[dst + 2 * s.heads_q * s.head_dim + e] = vb[src];
      }
  DeviceBuffer<uint16_t> qkv(packed), o(p.q_elems());
  DeviceBuffer<float> lse(p.lse_elems());
  flash2::ForwardArgs fa;
  fa.shape = s;
  fa.mask = p.mask();
  auto view = [&](int which) {
    return flash2::Tensor{qkv.get() + which * s.heads_q * s.head_dim, s.q_len * row, row,
                          s.head_dim};
  };
  fa.q = view(0);
  fa.k = view(1);
  fa.v = view(2);
  fa.o = flash2::contiguous(o.get(), s.q_len, s.heads_q, s.head_dim);
  fa.lse = lse.get();
  CUDA_OK(flash2::forward(fa));
  CUDA_OK(cudaDeviceSynchronize());
  const ts::Oracle ref = ts::make_oracle(p, false);
  EXPECT_TRUE(ts::flash_rule("o", ts::from_bits(o.download()), ref.o, ref.o_naive));
}

// A ring of 4 steps: each rank's query block against every key block (causal offsets), merged
// into an FP32 accumulator in place, reproduces causal attention over the whole sequence.
TEST_F(Flash2Gpu, RingStepsWithMergeReproduceCausalAttention) {
  const int n = 4, a = 160;
  const AttnShape whole{1, n * a, n * a, 4, 2, 128};
  const ts::Problem p = ts::make_problem(whole, MaskKind::Causal, BenchShape{}, 11);
  const ts::Oracle ref = ts::make_oracle(p, false);
  const auto qb = ts::to_bits(p.q), kb = ts::to_bits(p.k), vb = ts::to_bits(p.v);
  const int hq = whole.heads_q, hkv = whole.heads_kv, d = whole.head_dim;
  std::vector<float> merged(p.q_elems()), merged_lse(p.lse_elems());
  const AttnShape blk{1, a, a, hq, hkv, d};
  for (int r = 0; r < n; ++r) {
    const std::vector<uint16_t> qr(qb.begin() + static_cast<long>(r) * a * hq * d,
                                   qb.begin() + static_cast<long>(r + 1) * a * hq * d);
    DeviceBuffer<uint16_t> q(qr), ob(static_cast<size_t>(a) * hq * d);
    DeviceBuffer<float> acc(std::vector<float>(static_cast<size_t>(a) * hq * d, 0.f));
    DeviceBuffer<float> acc_lse(std::vector<float>(static_cast<size_t>(hq) * a, -INFINITY));
    DeviceBuffer<float> lb(static_cast<size_t>(hq) * a);
    for (int step = 0; step < n; ++step) {
      const int src = (r - step + n) % n;
      const std::vector<uint16_t> ks(kb.begin() + static_cast<long>(src) * a * hkv * d,
                                     kb.begin() + static_cast<long>(src + 1) * a * hkv * d);
      const std::vector<uint16_t> vs(vb.begin() + static_cast<long>(src) * a * hkv * d,
                                     vb.begin() + static_cast<long>(src + 1) * a * hkv * d);
      DeviceBuffer<uint16_t> k(ks), v(vs);
      flash2::ForwardArgs fa;
      fa.shape = blk;
      fa.mask.causal = true;
      fa.mask.q_offset = static_cast<int64_t>(r) * a;
      fa.mask.k_offset = static_cast<int64_t>(src) * a;
      fa.q = flash2::contiguous(q.get(), a, hq, d);
      fa.k = flash2::contiguous(k.get(), a, hkv, d);
      fa.v = flash2::contiguous(v.get(), a, hkv, d);
      fa.o = flash2::contiguous(ob.get(), a, hq, d);
      fa.lse = lb.get();
      CUDA_OK(flash2::forward(fa));
      flash2::MergeArgs m;
      m.batch = 1;
      m.q_len = a;
      m.heads = hq;
      m.head_dim = d;
      m.o1 = acc.get();
      m.lse1 = acc_lse.get();
      m.o2 = ob.get();
      m.lse2 = lb.get();
      m.o = acc.get();
      m.lse = acc_lse.get();
      CUDA_OK(flash2::merge(m));
      CUDA_OK(cudaDeviceSynchronize());
    }
    const auto o = acc.download(), l = acc_lse.download();
    for (int i = 0; i < a; ++i)
      for (int h = 0; h < hq; ++h) {
        merged_lse[static_cast<size_t>(h) * n * a + r * a + i] = l[static_cast<size_t>(h) * a + i];
        for (int e = 0; e < d; ++e) {
          merged[(static_cast<size_t>(r * a + i) * hq + h) * d + e] =
              o[(static_cast<size_t>(i) * hq + h) * d + e];
        }
      }
  }
  // Each step's output is rounded to BF16 before the merge: allow 3x the naive error.
  EXPECT_TRUE(ts::flash_rule("ring o", merged, ref.o, ref.o_naive, 3.0));
  EXPECT_TRUE(ts::flash_rule("ring lse", merged_lse, ref.lse, ref.lse_naive, 2.0, 1e-4));
}

TEST_F(Flash2Gpu, RejectsUnsupportedArguments) {
  flash2::ForwardArgs fa;
  fa.shape = AttnShape{1, 64, 64, 3, 2, 128};  // heads_q not a multiple of heads_kv
  EXPECT_THROW(flash2::forward(fa), std::invalid_argument);
}

}  // namespace
