// PyTorch's caching allocator as a size model (sim/model/allocator): the rounding and segment
// rules of c10/cuda/CUDACachingAllocator.cpp, exact bytes for known requests, and the memory
// beside it (NCCL buffers, cuBLAS workspaces) from NCCL's and PyTorch's sources.
#include "model/allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/memory.hpp"
#include "model/nccl_channels.hpp"
#include "scenario/load.hpp"
#include "support/fixtures.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim;

namespace {

constexpr double kMiB = 1 << 20;

scenario::Scenario anchor(int tp, int cp, int dp) {
  scenario::Scenario sc;
  sc.model = fixtures::anchor_model();
  sc.platform = fixtures::nvswitch_node(8, 450e9, 1e-6);  // 450 GB/s: NCCL's 16 x 2 = 32 channels
  sc.platform.gpu.memory_bytes = 80e9;
  sc.training.seq_len = 131072;
  sc.parallel.tp = tp;
  sc.parallel.cp = cp;
  sc.parallel.dp = dp;
  sc.parallel.zero_stage = 3;
  return sc;
}

}  // namespace

TEST(CachingAllocator, RoundsRequestsTo512Bytes) {
  EXPECT_EQ(model::allocator_block_bytes(1), 512);
  EXPECT_EQ(model::allocator_block_bytes(512), 512);
  EXPECT_EQ(model::allocator_block_bytes(513), 1024);
  EXPECT_EQ(model::allocator_block_bytes(1 << 20), 1 << 20);
}

TEST(CachingAllocator, SegmentSizesByPool) {
  EXPECT_EQ(model::allocator_segment_bytes(1000), 2 * kMiB);             // small pool
  EXPECT_EQ(model::allocator_segment_bytes(kMiB), 2 * kMiB);             // kSmallSize is small
  EXPECT_EQ(model::allocator_segment_bytes(kMiB + 1), 20 * kMiB);        // kLargeBuffer
  EXPECT_EQ(model::allocator_segment_bytes(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(model::allocator_segment_bytes(10 * kMiB), 10 * kMiB);       // kMinLargeAlloc: own segment
  EXPECT_EQ(model::allocator_segment_bytes(10 * kMiB + 1), 12 * kMiB);   // rounded to kRoundLarge
}

TEST(CachingAllocator, LargeTensorsTakeASegmentEach) {
  // 8192 x 4096 bf16: 64 MiB, already a 2 MiB multiple.
  auto f = model::allocator_footprint(64 * kMiB, 3, false);
  EXPECT_EQ(f.allocated, 3 * 64 * kMiB);
  EXPECT_EQ(f.reserved, 3 * 64 * kMiB);
  // 10.5 MiB: a 12 MiB segment whose 1.5 MiB tail is split off (more than kSmallSize).
  f = model::allocator_footprint(10.5 * kMiB, 1, false);
  EXPECT_EQ(f.allocated, 10.5 * kMiB);
  EXPECT_EQ(f.reserved, 12 * kMiB);
  // 11 MiB: the 1 MiB tail is not split off, the block keeps it.
  f = model::allocator_footprint(11 * kMiB, 1, false);
  EXPECT_EQ(f.allocated, 12 * kMiB);
  EXPECT_EQ(f.reserved, 12 * kMiB);
}

TEST(CachingAllocator, SmallAndMidSizeTensorsShareSegments) {
  // 3 MiB blocks: six to a 20 MiB segment, so ten take two segments.
  auto f = model::allocator_footprint(3 * kMiB, 10, false);
  EXPECT_EQ(f.allocated, 30 * kMiB);
  EXPECT_EQ(f.reserved, 40 * kMiB);
  // 1000 B -> 1024 B blocks, 2048 to a 2 MiB segment: 5000 take three.
  f = model::allocator_footprint(1000, 5000, false);
  EXPECT_EQ(f.allocated, 5000 * 1024);
  EXPECT_EQ(f.reserved, 6 * kMiB);
}

TEST(CachingAllocator, ExpandableSegmentsReserveTheBlocksOnly) {
  const auto f = model::allocator_footprint(3 * kMiB, 10, true);
  EXPECT_EQ(f.allocated, 30 * kMiB);
  EXPECT_EQ(f.reserved, 30 * kMiB);
}

TEST(CachingAllocator, ReservedNeverBelowAllocatedNorRequested) {
  for (bool exp : {false, true})
    for (double size = 1; size < 3e9; size *= 1.37)
      for (double n : {1.0, 7.0, 1000.0}) {
        const auto f = model::allocator_footprint(size, n, exp);
        EXPECT_GE(f.reserved, f.allocated) << size << " x " << n;
        EXPECT_GE(f.allocated, size * n) << size << " x " << n;
      }
}

TEST(CachingAllocator, EveryRankClassReservesAtLeastWhatItAllocates) {
  for (int pp : {1, 4}) {
    auto sc = anchor(1, 8, 1);
    sc.parallel.pp = pp;
    sc.training.micro_batches = 8;
    for (const auto& c : model::memory_by_rank_class(sc)) {
      EXPECT_GE(c.memory.peak_bytes, c.memory.allocated_bytes) << c.name;
      double requested = 0;
      for (const auto& t : c.memory.terms) {
        EXPECT_GE(t.reserved, t.allocated) << t.name;
        EXPECT_GE(t.allocated + 1e-3, t.bytes) << t.name;
        requested += t.bytes;
      }
      // Without expandable segments (Megatron's default is not set here: torch stacks turn
      // them on), fragmentation makes reserved strictly larger.
      EXPECT_GT(c.memory.peak_bytes, requested) << c.name;
    }
  }
}

TEST(CachingAllocator, FragmentationKeyScalesTheFreeBlocks) {
  auto sc = anchor(1, 8, 1);
  sc.memory.allocator.expandable_segments = 0;
  sc.memory.allocator.fragmentation = 0;
  const auto none = model::peak_rank_memory(sc);
  sc.memory.allocator.fragmentation = 0.2;
  const auto some = model::peak_rank_memory(sc);
  double inside = 0;
  for (const auto& t : none.terms)
    if (!t.outside_allocator) inside += t.reserved;
  // reserved = inside / (1 - f): the free blocks are a share f of the reserved memory.
  EXPECT_NEAR(some.peak_bytes - none.peak_bytes, inside * 0.2 / 0.8, 1.0);
}

TEST(FixedMemory, NoFlatThreeGigabyteTerm) {
  for (const auto& t : model::peak_rank_memory(anchor(1, 8, 1)).terms)
    EXPECT_EQ(t.name.find("allocator slack"), std::string::npos) << t.name;
}

TEST(FixedMemory, NcclBuffersPerCommunicatorFromNcclsSource) {
  // One connection: LL 512 KiB + LL128 4,800 KiB + SIMPLE 4 MiB at the receiver, rounded to
  // cuMem's 2 MiB (10 MiB), and 2 MiB at the sender: 12 MiB per channel; 32 channels.
  auto sc = anchor(8, 1, 1);
  sc.platform.nccl.nvls = false;
  std::vector<model::NcclGroupBuffers> g;
  EXPECT_EQ(model::nccl_buffer_bytes(sc, &g), 32 * 12 * kMiB);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].group, "TP");
  // NVLS adds 16 channels x 2 x 128 KiB x 8 steps per local GPU (8).
  sc.platform.nccl.nvls = true;
  EXPECT_EQ(model::nccl_buffer_bytes(sc), 32 * 12 * kMiB + 16 * 2 * 1 * kMiB * 8);
  // A ring-attention CP group of 8 on the node: p2p with two neighbours, 32 channels each.
  auto cp = anchor(1, 8, 1);
  g.clear();
  model::nccl_buffer_bytes(cp, &g);
  ASSERT_EQ(g.size(), 2u);  // CP, and DP x CP for the gradients
  EXPECT_EQ(g[0].group, "CP");
  EXPECT_EQ(g[0].bytes, 2 * 32 * 12 * kMiB);
  // One GPU alone creates no communicator.
  EXPECT_EQ(model::nccl_buffer_bytes(anchor(1, 1, 1)), 0);
}

TEST(FixedMemory, NcclBufferChannelsAreTheChannelSearchsOnEveryPreset) {
  // One copy of NCCL's channel search (model/nccl_channels): a TP communicator of a node holds
  // one 12 MiB connection per p2p channel of that node's communicator, as the tuner's p2p_plan
  // counts them (NVLS off, so the rings alone). dgx-a100's 12 searched channels give 32 p2p
  // channels (a re-derivation of one channel per 20 GB/s gave 24); hgx-h800's 4 give 8 (16).
  for (const char* preset : {"dgx-a100", "dgx-h100", "hgx-h800", "gb200-nvl72", "l40s-pcie"}) {
    auto sc = anchor(8, 1, 1);
    sc.platform = scenario::load_platform(preset);
    sc.platform.nccl.nvls = false;
    const int domain = std::max(sc.platform.nvlink_domain_gpus, sc.platform.gpus_per_node);
    const int channels = model::nccl_p2p_channels(sc.platform, model::GroupShape{domain, 1, domain, 1});
    std::vector<model::NcclGroupBuffers> g;
    model::nccl_buffer_bytes(sc, &g);
    ASSERT_FALSE(g.empty()) << preset;
    EXPECT_EQ(g[0].bytes, channels * 12 * kMiB) << preset;
  }
  EXPECT_EQ(model::nccl_p2p_channels(scenario::load_platform("dgx-a100"), model::GroupShape{8, 1, 8, 1}), 32);
  EXPECT_EQ(model::nccl_p2p_channels(scenario::load_platform("dgx-h100"), model::GroupShape{8, 1, 8, 1}), 32);
}

TEST(FixedMemory, CublasWorkspaceByStackAndArchitecture) {
  auto sc = anchor(1, 1, 1);
  double n = 0;
  sc.platform.gpu.arch = scenario::GpuArch::Hopper;
  sc.training.stack = scenario::Stack::TorchEager;
  EXPECT_EQ(model::cublas_workspace_bytes(sc, &n), 32 * kMiB);  // PyTorch: 4096 x 8 KiB on sm90
  sc.platform.gpu.arch = scenario::GpuArch::Ampere;
  EXPECT_EQ(model::cublas_workspace_bytes(sc, &n), 4096.0 * 2 * 1024 + 16 * 8 * 1024);  // :4096:2:16:8
  sc.training.stack = scenario::Stack::MegatronTe;
  EXPECT_EQ(model::cublas_workspace_bytes(sc, &n), 4 * kMiB);  // TE: 4 MiB before Hopper
  EXPECT_EQ(n, 1);
}

TEST(FixedMemory, AllocatorDefaultsFollowTheStack) {
  auto sc = anchor(1, 1, 1);
  sc.training.stack = scenario::Stack::TorchCompile;
  EXPECT_TRUE(model::allocator_settings(sc).expandable_segments);  // torchtitan's run_train.sh
  EXPECT_EQ(model::allocator_settings(sc).fragmentation, 0);
  sc.training.stack = scenario::Stack::MegatronTe;
  EXPECT_FALSE(model::allocator_settings(sc).expandable_segments);
  EXPECT_EQ(model::allocator_settings(sc).fragmentation, 0.15);
  sc.memory.allocator.fragmentation = 0.05;
  EXPECT_EQ(model::allocator_settings(sc).fragmentation, 0.05);
}

}  // namespace CPSIM_TEST_TU
