#include "model/offload.hpp"

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

bool layer_offloaded(const scenario::Scenario& sc, int layer) {
  return sc.mode == scenario::Mode::Train && layer < sc.training.offload_layers;
}

}  // namespace cpsim::model
