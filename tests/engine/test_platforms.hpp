#pragma once
// Platforms built in code (the tests must not depend on the YAML loader). Figures follow
// platforms/dgx-h100.yaml and calibration.md.
#include "scenario/specs.hpp"

namespace cpsim::test {

/// One DGX H100: 8 GPUs on NVSwitch, NVLink4 450 GB/s x 0.824 (NCCL's 370.8 GB/s), 0.3 us per
/// link direction; 8 NDR rails.
inline scenario::PlatformSpec dgx_h100(int nodes = 1) {
  scenario::PlatformSpec p;
  p.name = "dgx-h100-test";
  p.gpu.name = "H100-SXM";
  p.gpu.peak_flops = 989e12;
  p.nodes = nodes;
  p.gpus_per_node = 8;
  p.intra = scenario::IntraFabric::NVSwitch;
  p.nvlink = {450e9, 0.3e-6, 0.824};
  p.nvlink_domain_gpus = 8;
  p.nics_per_node = 8;
  p.nic = {50e9, 1.27e-6, 0.94};  // NDR 400 Gb/s, ~47 GB/s through NCCL
  p.nodes_per_leaf = 32;
  p.spines = 8;
  p.oversubscription = 1;
  p.switch_latency_s = 150e-9;
  p.nccl.p2p_max_Bps = 180e9;
  p.nccl.p2p_latency_s = 2.5e-6;
  return p;
}

/// A PCIe box: 8 GPUs, 2 per PCIe switch, 2 switches per CPU, 2 CPUs.
inline scenario::PlatformSpec pcie_box(int nodes = 1) {
  scenario::PlatformSpec p = dgx_h100(nodes);
  p.name = "pcie-test";
  p.intra = scenario::IntraFabric::PCIe;
  p.pcie = {31.5e9, 0.5e-6, 0.8};
  p.pcie_uplink = {31.5e9, 0.3e-6, 0.8};
  p.cpu_link = {40e9, 0.5e-6, 0.7};
  p.gpus_per_pcie_switch = 2;
  p.pcie_switches_per_cpu = 2;
  p.nics_per_node = 4;
  return p;
}

}  // namespace cpsim::test
