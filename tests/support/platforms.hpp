#pragma once
// Platforms and small jobs built in code (the tests must not depend on the YAML loader).
// Figures follow platforms/dgx-h100.yaml and calibration.md.
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

/// A small model (4 layers, hidden 1024) at 16K tokens, CP 8 per replica (one DGX node each)
/// and 4 data-parallel replicas, ZeRO-1: the replica shortcuts' test job
/// (scale_shortcuts_test, replica_copy_test). Each replica (one node) fills its own leaf group.
inline scenario::Scenario small_dp_job(scenario::Symmetry sym) {
  scenario::Scenario sc;
  sc.model.name = "small";
  sc.model.layers = 4;
  sc.model.hidden = 1024;
  sc.model.heads_q = 8;
  sc.model.heads_kv = 8;
  sc.model.head_dim = 128;
  sc.model.ffn_hidden = 4096;
  sc.model.vocab = 32000;
  sc.training.seq_len = 16384;
  sc.training.micro_batches = 2;
  sc.parallel.cp = 8;
  sc.parallel.dp = 4;
  sc.parallel.zero_stage = 1;
  sc.simulation.symmetry = sym;
  sc.platform = dgx_h100(4);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.platform.nodes_per_leaf = 1;
  return sc;
}

/// small_dp_job's 4 layers at Llama-3 8B's width (hidden 4096, GQA 32 / 8 heads of 128, SwiGLU
/// 14336), 4K tokens, TP 8 and DP 4 over the 4 nodes: its gradients reduce over DP across the
/// nodes' NICs, slow enough next to the compute to show in the step (the data-parallel,
/// offload and checkpointing tests).
inline scenario::Scenario llama8b_tp8_job() {
  auto sc = small_dp_job(scenario::Symmetry::Auto);
  sc.model.hidden = 4096;
  sc.model.heads_q = 32;
  sc.model.heads_kv = 8;
  sc.model.ffn_hidden = 14336;
  sc.training.seq_len = 4096;
  sc.parallel.tp = 8;
  sc.parallel.cp = 1;
  sc.parallel.dp = 4;
  return sc;
}

/// small_dp_job's model on `nodes` DGX H100 nodes with pipelined collectives (as above 512
/// GPUs): the lean-build tests (lean_collectives_test, tp_mirror_test).
inline scenario::Scenario pipelined_job(int nodes, int tp, int cp, int dp) {
  auto sc = small_dp_job(scenario::Symmetry::Auto);
  sc.platform = dgx_h100(nodes);
  sc.platform.gpu = {"H100", 989e12, 795e12, 2.95e12, 80e9};
  sc.parallel.tp = tp;
  sc.parallel.cp = cp;
  sc.parallel.dp = dp;
  sc.simulation.collectives = scenario::CollectiveModel::Pipelined;
  return sc;
}

/// pipelined_job with compute interference and every runtime overhead (kernel launches,
/// framework ops, ring-step event waits, NCCL launches): what the exact shortcuts must keep.
inline scenario::Scenario overhead_job(int nodes, int tp, int cp, int dp) {
  auto sc = pipelined_job(nodes, tp, cp, dp);
  sc.platform.compute_interference = 0.2;
  sc.platform.runtime.kernel_launch_s = 3e-6;
  sc.platform.runtime.host_op_s = 10e-6;
  sc.platform.runtime.ops_per_attention = 8;
  sc.platform.runtime.ring_step_sync_s = 5e-6;
  sc.platform.runtime.nccl_launch_s = 5e-6;
  return sc;
}

}  // namespace cpsim::test
