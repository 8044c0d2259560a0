#include "model/offload.hpp"

#include <algorithm>

#include "model/transformer.hpp"

namespace cpsim::model {

double offload_layer_bytes(const scenario::Scenario& sc) {
  auto one = sc;
  one.training.recompute = scenario::Recompute::None;
  one.training.offload_layers = 0;
  return stage_activation_bytes(one, 1, 1);
}

double host_copy_seconds(double bytes) {
  // An H100 SXM reaches its host over PCIe Gen5 x16 (H100 datasheet): 16 lanes x 32 GT/s with
  // 128b/130b encoding = 63.0 GB/s per direction; DMA writes of 256-byte TLP payloads carry
  // about 24 bytes of TLP and link-layer framing each (PCIe 5.0 base specification), so
  // 256 / 280 of it moves data: 57.6 GB/s. Assumed: pinned host buffers, the copy engines'
  // stream alone on the link (Grace Hopper's NVLink-C2C is not modelled).
  constexpr double kPcieGen5x16Bps = 16 * 32e9 * 128.0 / 130.0 / 8.0;
  constexpr double kTlpEfficiency = 256.0 / 280.0;
  return bytes / (kPcieGen5x16Bps * kTlpEfficiency);
}

OptimizerOffloadTime optimizer_offload_time(const scenario::Scenario& sc, double params) {
  // Host memory bandwidth: a DGX H100 has two Xeon Platinum 8480C (DGX H100 user guide), each
  // with 8 DDR5-4800 channels of 8 B (Intel ARK): 2 x 8 x 4.8e9 x 8 = 614.4 GB/s per node,
  // shared by its GPUs' ranks stepping at once. Assumed: every node's host is such a one, and
  // the CPU Adam runs at that bandwidth (it is memory-bound: a handful of FLOPs per 28 B).
  constexpr double kHostDramBps = 2 * 8 * 4.8e9 * 8;
  // torch.optim.AdamW over fp32 tensors per parameter: reads the gradient (4 B), reads and
  // writes the master weight, m and v (3 x 8 B).
  constexpr double kAdamBytesPerParam = 4 + 3 * 8;
  const double per_rank = kHostDramBps / std::max(1, sc.platform.gpus_per_node);
  OptimizerOffloadTime t;
  t.d2h_s = host_copy_seconds(kFp32Bytes * params);
  t.cpu_step_s = params * kAdamBytesPerParam / per_rank;
  t.h2d_s = host_copy_seconds(kFp32Bytes * params);
  return t;
}

bool layer_offloaded(const scenario::Scenario& sc, int layer) {
  return sc.mode == scenario::Mode::Train && layer < sc.training.offload_layers;
}

}  // namespace cpsim::model
