// flash2 launchers on the CPU emulator (mirror cuda.cu's grids and launch order).
#include "emulate.hpp"

#include <cstring>
#include <stdexcept>

#include "flash_bwd.hpp"
#include "flash_fwd.hpp"

namespace cpsim::kernels::flash2::emulate {
namespace {

/// kv_split = 0 picks the split for an H100's 132 SMs.
constexpr int kEmulatedSms = 132;

template <int D>
void forward_d(const FwdParams& p, const std::vector<emu::Span>& memory, emu::CopyTiming timing) {
  using T = typename FwdConfig<D>::Traits;
  emu::LaunchConfig cfg;
  cfg.grid_x = ceil_div(p.q_len, T::kBr);
  cfg.grid_y = p.heads_q;
  cfg.grid_z = p.batch;
  cfg.threads = T::kThreads;
  cfg.smem_bytes = T::kSmemBytes;
  cfg.timing = timing;
  emu::run(cfg, memory, [&p](emu::Lane& dev) { fwd_body<T>(p, dev); });
}

template <int D>
void backward_d(const BwdParams& p, const std::vector<emu::Span>& memory, emu::CopyTiming timing) {
  using T = typename BwdConfig<D>::Traits;
  std::memset(p.dq_accum, 0, sizeof(float) * p.batch * p.q_len * p.heads_q * D);
  emu::LaunchConfig pre;
  pre.grid_x = ceil_div(p.q_len * p.heads_q, kDsumWarps);
  pre.grid_y = p.batch;
  pre.threads = 32 * kDsumWarps;
  emu::run(pre, memory, [&p](emu::Lane& dev) { dsum_body<D>(p, dev); });

  static_assert(T::kBc == (D == 256 ? 64 : 128), "backward_key_tile() must match BwdConfig");
  const size_t dkv_elems = static_cast<size_t>(p.batch) * p.kv_len * p.heads_kv * D;
  if (p.kv_split > 1) std::memset(p.dkv_accum, 0, 2 * sizeof(float) * dkv_elems);
  emu::LaunchConfig main;
  main.grid_x = ceil_div(p.kv_len, T::kBc);
  main.grid_y = p.heads_kv * p.kv_split;
  main.grid_z = p.batch;
  main.threads = T::kThreads;
  main.smem_bytes = T::kSmemBytes;
  main.timing = timing;
  emu::run(main, memory, [&p](emu::Lane& dev) { bwd_body<T>(p, dev); });

  emu::LaunchConfig post;
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.q_len * p.heads_q * (D / 2);
  post.grid_x = static_cast<int>((pairs + kConvertThreads - 1) / kConvertThreads);
  post.threads = kConvertThreads;
  emu::run(post, memory, [&p](emu::Lane& dev) { dq_convert_body<D>(p, dev); });
  if (p.kv_split > 1) {
    emu::LaunchConfig kv;
    kv.grid_x = static_cast<int>((dkv_elems / 2 + kConvertThreads - 1) / kConvertThreads);
    kv.threads = kConvertThreads;
    emu::run(kv, memory, [&p](emu::Lane& dev) { dkv_convert_body<D>(p, dev); });
  }
}

}  // namespace

void forward(const ForwardArgs& args, const std::vector<emu::Span>& memory,
             emu::CopyTiming timing) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  const FwdParams p = make_fwd_params(args);
  switch (args.shape.head_dim) {
    case 64:
      forward_d<64>(p, memory, timing);
      break;
    case 128:
      forward_d<128>(p, memory, timing);
      break;
    case 256:
      forward_d<256>(p, memory, timing);
      break;
  }
}

void backward(const BackwardArgs& args, const std::vector<emu::Span>& memory,
              emu::CopyTiming timing) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  const BwdParams p = make_bwd_params(args, kEmulatedSms);
  switch (args.shape.head_dim) {
    case 64:
      backward_d<64>(p, memory, timing);
      break;
    case 128:
      backward_d<128>(p, memory, timing);
      break;
    case 256:
      backward_d<256>(p, memory, timing);
      break;
  }
}

void merge(const MergeArgs& args, const std::vector<emu::Span>& memory) {
  if (const std::string e = check(args); !e.empty()) throw std::invalid_argument(e);
  const MergeParams p = make_merge_params(args);
  emu::LaunchConfig cfg;
  cfg.grid_x = ceil_div(p.q_len * p.heads, kMergeWarps);
  cfg.grid_y = p.batch;
  cfg.threads = 32 * kMergeWarps;
  emu::run(cfg, memory, [&p](emu::Lane& dev) { merge_body(p, dev); });
}

}  // namespace cpsim::kernels::flash2::emulate
