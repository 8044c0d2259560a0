// The caching allocator's rounding and segments, the allocator settings a scenario runs with,
// and the memory beside it (CUDA context, NCCL buffers, cuBLAS workspaces), each from its source.
#include "model/allocator.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/nccl_channels.hpp"

namespace cpsim::model {

namespace {

double alloc_round_up(double x, double unit) { return std::ceil(x / unit) * unit; }

}  // namespace

double allocator_block_bytes(double bytes) {
  // round_size: requests below kMinBlockSize get it, others the next multiple of it (the
  // roundup_power2_divisions option is off by default).
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return alloc_round_up(bytes, kMinBlockSize);
}

double allocator_segment_bytes(double bytes) {
  // get_allocation_size, applied to the rounded request.
  const double b = allocator_block_bytes(bytes);
  if (b <= kSmallSize) return kSmallBuffer;
  if (b < kMinLargeAlloc) return kLargeBuffer;
  return alloc_round_up(b, kRoundLarge);
}

AllocatorFootprint allocator_footprint(double tensor_bytes, double count, bool expandable_segments) {
  AllocatorFootprint f;
  if (tensor_bytes <= 0 || count <= 0) return f;
  const double n = std::ceil(count - 1e-9);
  const double block = allocator_block_bytes(tensor_bytes);
  const double segment = allocator_segment_bytes(tensor_bytes);
  if (!expandable_segments && block >= kMinLargeAlloc && segment - block <= kSmallSize) {
    // A segment of its own whose tail is too small to split (should_split: remaining >
    // kSmallSize in the large pool): the block keeps the whole segment.
    f.allocated = n * segment;
  } else {
    f.allocated = n * block;
  }
  if (expandable_segments) {
    // One mapping per pool that grows by whole pages (2 MiB small, 20 MiB large) and whose
    // blocks split and merge inside it: the live blocks cover it but for one partial page,
    // left to the total (estimate_memory's allocator row).
    f.reserved = f.allocated;
  } else if (block >= kMinLargeAlloc) {
    f.reserved = n * segment;  // one segment per tensor
  } else {
    // Blocks carved from shared segments (2 MiB small, 20 MiB mid-size) by splitting.
    const double per = std::max(1.0, std::floor(segment / block));
    f.reserved = std::ceil(n / per) * segment;
  }
  f.reserved = std::max(f.reserved, f.allocated);
  return f;
}

AllocatorSettings allocator_settings(const scenario::Scenario& sc) {
  const auto& a = sc.memory.allocator;
  AllocatorSettings s;
  // torchtitan's run_train.sh exports PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True";
  // Megatron-LM leaves PyTorch's default (off).
  const bool torch_stack = sc.training.stack != scenario::Stack::MegatronTe;
  s.expandable_segments = a.expandable_segments < 0 ? torch_stack : a.expandable_segments > 0;
  std::string es = a.expandable_segments < 0
                       ? std::string("expandable_segments ") + (s.expandable_segments ? "on (torchtitan's run_train.sh)"
                                                                                       : "off (PyTorch's default)")
                       : std::string("memory.allocator.expandable_segments: ") +
                             (s.expandable_segments ? "true" : "false");
  if (a.fragmentation >= 0) {
    s.fragmentation = a.fragmentation;
    s.source = es + ", memory.allocator.fragmentation";
  } else if (s.expandable_segments) {
    // Free blocks merge with the growing end of the segment and are reused by any size
    // (PyTorch PR 96995, "Expandable blocks in allocator"): no stranded segments assumed.
    s.fragmentation = 0;
    s.source = es + ", fragmentation 0 assumed";
  } else {
    // GMLake (Guo et al., ASPLOS 2024): over eight LLM training runs on A100-80GB the
    // splitting caching allocator left 15 % of its reserved memory in free blocks on average
    // (up to 33 %), which virtual-memory stitching recovered.
    s.fragmentation = 0.15;
    s.source = es + ", fragmentation 0.15 (GMLake, ASPLOS'24 average)";
  }
  return s;
}

double cuda_context_bytes(const scenario::Scenario&) {
  // The context PyTorch's first CUDA call creates with lazy module loading (CUDA >= 11.7, the
  // default since 12.2): "around 400MB" (ptrblck, pytorch/pytorch#109888); kernels loaded later
  // in the step add to it and are not counted.
  return 400e6;
}

namespace {

constexpr double kNcclMiB = 1 << 20;
// NCCL's per-protocol buffers of one connection (src/init.cc computeBuffSizes, device.h):
// LL 8 lines x 512 threads x 8 steps x 16 B, LL128 120 x 640 x 8 x 8 B, SIMPLE 4 MiB.
constexpr double kNcclLL = 8.0 * 512 * 8 * 16;
constexpr double kNcclLL128 = 120.0 * 640 * 8 * 8;
constexpr double kNcclSimple = 4 * kNcclMiB;
// The receiver holds all three (p2p.cc p2pRecvSetup); cuMem rounds each allocation to its 2 MiB
// granularity, so a connection is 10 MiB at the receiver and 2 MiB (ncclSendMem) at the sender:
// the 10485760 and 2097152 B allocations NCCL_DEBUG_SUBSYS=ALLOC shows (NVIDIA/nccl#1685).
constexpr double kCuMemGranularity = 2 * kNcclMiB;
const double kNcclConnection = alloc_round_up(kNcclLL + kNcclLL128 + kNcclSimple, kCuMemGranularity) + kCuMemGranularity;

struct NcclComm {
  const char* name;
  int n = 1;        // members
  int ppn = 1;      // members in one NVLink domain
  int peers = 0;    // p2p peers (0: a collective on rings)
};

}  // namespace

double nccl_buffer_bytes(const scenario::Scenario& sc, std::vector<NcclGroupBuffers>* per_group) {
  const auto& p = sc.parallel;
  const auto& pl = sc.platform;
  const bool nvswitch = pl.intra == scenario::IntraFabric::NVSwitch;
  const int domain = nvswitch ? std::max(pl.nvlink_domain_gpus, pl.gpus_per_node) : pl.gpus_per_node;
  // Channels within an NVLink domain: a domain's communicator's p2p channels as NCCL's channel
  // search gives them (model/nccl_channels): 32 on H100 (NCCL_DEBUG=INFO "Channel 00/1 ...
  // 31/1" between two H100s, NVIDIA/nccl#1685). Across nodes one channel per rail, doubled.
  const int intra_channels = nccl_p2p_channels(pl, GroupShape{domain, 1, domain, 1});
  const auto& a = p.attention;
  // A group's members lie `stride` ranks apart: the product of the dimensions before it in
  // parallel.order (innermost first).
  auto stride = [&](const std::string& dim) {
    int s = 1;
    for (const auto& d : p.order) {
      if (d == dim) break;
      s *= d == "tp" ? p.tp : d == "cp" ? p.cp : d == "pp" ? p.pp : d == "dp" ? p.dp : 1;
    }
    return s;
  };
  // Members of a group of n, `s` ranks apart, that share an NVLink domain.
  auto local = [&](int n, int s) { return std::max(1, std::min(n, domain / std::max(1, s))); };
  std::vector<NcclComm> comms;
  if (p.tp > 1) comms.push_back({"TP", p.tp, local(p.tp, stride("tp")), 0});
  if (p.cp > 1) {
    const bool a2a = a.scheme == scenario::AttentionScheme::Ulysses || a.scheme == scenario::AttentionScheme::Usp;
    const bool gather = a.scheme == scenario::AttentionScheme::AllGather;
    comms.push_back({"CP", p.cp, local(p.cp, stride("cp")), gather ? 0 : (a2a ? p.cp - 1 : std::min(2, p.cp - 1))});
  }
  // Gradients reduce over DP x CP (Megatron's data-parallel group with context parallelism,
  // torchtitan's dp_shard_cp mesh).
  // HSDP (torchtitan's dp_replicate x dp_shard_cp mesh): the shard group's communicator and
  // the replicate group's, whose members lie a shard group apart.
  const int shard = p.zero_stage >= 3 ? p.dp_shard() : p.dp;
  if (shard * p.cp > 1)
    comms.push_back({"DP", shard * p.cp, local(p.cp, stride("cp")) * local(shard, stride("dp")), 0});
  if (shard < p.dp)
    comms.push_back({"DP replicate", p.dp / shard, local(p.dp / shard, stride("dp") * shard), 0});
  if (p.pp > 1) comms.push_back({"PP", p.pp, local(p.pp, stride("pp")), std::min(2, p.pp - 1)});
  // Megatron's expert groups: EP ranks expert_tp apart within TP x CP x DP.
  if (p.ep > 1) comms.push_back({"EP", p.ep, local(p.ep, p.expert_tp), p.ep - 1});
  double total = 0;
  for (const auto& c : comms) {
    const int ppn = c.ppn;
    const bool in_domain = ppn >= c.n;
    double bytes = 0;
    if (c.peers > 0) {
      // p2p: every peer gets its own channels (p2pnChannelsPerPeer, the ring's channels in a
      // domain; NCCL_NCHANNELS_PER_NET_PEER = 2 across the network).
      const int local_peers = std::min(c.peers, ppn - 1);
      bytes = (local_peers * intra_channels + (c.peers - local_peers) * 2) * kNcclConnection;
    } else {
      // Rings: one send and one receive connection per channel.
      const int rails = std::max(1, std::min(ppn, std::max(1, pl.nics_per_node)));
      const int channels = in_domain ? intra_channels : 2 * rails;
      bytes = channels * kNcclConnection;
      // NVLS (NVLink SHARP) for the collectives of a domain's GPUs: nChannels (16 on Hopper,
      // 24 on NVL72-class Blackwell) x 2 x one chunk (128 KiB) x NCCL_STEPS per head, one head
      // per local GPU (transport/nvls.cc ncclNvlsBufferSetup, ncclNvlsTuning).
      if (pl.nccl.nvls && nvswitch && ppn >= 2) {
        const int nvls_channels = pl.gpu.arch == scenario::GpuArch::Blackwell ? 24 : 16;
        bytes += nvls_channels * 2.0 * (128 * 1024) * 8 * ppn;
      }
    }
    total += bytes;
    if (per_group) per_group->push_back({c.name, bytes});
  }
  return total;
}

double cublas_workspace_bytes(const scenario::Scenario& sc, double* tensors) {
  const bool hopper_plus =
      sc.platform.gpu.arch == scenario::GpuArch::Hopper || sc.platform.gpu.arch == scenario::GpuArch::Blackwell;
  if (sc.training.stack == scenario::Stack::MegatronTe) {
    // TransformerEngine's get_cublas_workspace_size_bytes: 32 MiB on sm90+, else 4 MiB, one per
    // GEMM stream; grouped expert GEMMs run on 4 (num_cublas_streams).
    const double n = sc.parallel.ep > 1 || sc.model.moe.experts > 0 ? 1 + 4 : 1;
    if (tensors) *tensors = n;
    return n * (hopper_plus ? 33554432.0 : 4194304.0);
  }
  // PyTorch's CublasHandlePool.cpp: 4096 x 8 KiB (32 MiB) on Hopper and Blackwell, else
  // ":4096:2:16:8" (8.125 MiB), one per (handle, stream) that runs GEMMs: the compute stream.
  if (tensors) *tensors = 1;
  return hopper_plus ? 4096.0 * 8 * 1024 : 4096.0 * 1024 * 2 + 16.0 * 1024 * 8;
}

}  // namespace cpsim::model
