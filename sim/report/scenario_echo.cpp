// The result JSON's `scenario`: the resolved scenario as a scenario document the loader reads
// back (YAML accepts JSON), every key the run used under the loader's own name, quantities in
// SI units (bytes, bytes/s, seconds, FLOP/s: the loader takes bare numbers as those), enum
// values by the names in scenario/enum_names.hpp. `cpsim run <the echo>` repeats the run
// (tests/app/echo_test.cpp checks it for every bundled scenario).
#include "report/output.hpp"
#include "scenario/enum_names.hpp"

namespace cpsim::report {

using nlohmann::json;
using scenario::name_of;

namespace {

json link(const scenario::LinkSpec& l) {
  return {{"bw", l.bw_Bps}, {"latency", l.latency_s}, {"efficiency", l.efficiency}};
}

json protocols(const double (&v)[3]) { return {{"ll", v[0]}, {"ll128", v[1]}, {"simple", v[2]}}; }

json platform(const scenario::PlatformSpec& p) {
  const auto& g = p.gpu;
  json gpu = {{"name", g.name},         {"peak_flops", g.peak_flops}, {"gemm_flops", g.gemm_flops},
              {"hbm_bw", g.hbm_Bps},    {"memory", g.memory_bytes},   {"sm_count", g.sm_count},
              {"arch", scenario::arch_name(g.arch)}};
  if (g.fp8_peak_flops > 0) gpu["fp8_peak_flops"] = g.fp8_peak_flops;
  if (g.fp8_gemm_flops > 0) gpu["fp8_gemm_flops"] = g.fp8_gemm_flops;
  // Links that do not exist (bw 0) are left out: the loader requires a positive bandwidth.
  json intra = {{"fabric", name_of(p.intra, scenario::kFabricNames)}};
  if (p.intra == scenario::IntraFabric::NVSwitch) intra["nvlink_domain_gpus"] = p.nvlink_domain_gpus;
  else intra.update({{"gpus_per_pcie_switch", p.gpus_per_pcie_switch}, {"pcie_switches_per_cpu", p.pcie_switches_per_cpu}});
  const std::pair<const char*, const scenario::LinkSpec*> links[] = {
      {"nvlink", &p.nvlink}, {"pcie", &p.pcie}, {"pcie_uplink", &p.pcie_uplink}, {"cpu_link", &p.cpu_link}};
  for (const auto& [key, l] : links)
    if (l->bw_Bps > 0) intra[key] = link(*l);
  json network = {{"nics_per_node", p.nics_per_node}, {"nodes_per_leaf", p.nodes_per_leaf},
                  {"spines", p.spines},               {"oversubscription", p.oversubscription},
                  {"switch_latency", p.switch_latency_s}};
  if (p.nic.bw_Bps > 0) network["nic"] = link(p.nic);
  const auto& n = p.nccl;
  json nccl = {{"base_latency", protocols(n.base_latency_s)},
               {"hop_latency", {{"nvlink", protocols(n.hop_nvlink_s)},
                                {"pcie", protocols(n.hop_pcie_s)},
                                {"network", protocols(n.hop_net_s)}}},
               {"protocol_efficiency", protocols(n.protocol_efficiency)},
               {"p2p_latency", n.p2p_latency_s},
               {"arch", name_of(n.arch, scenario::kNcclArchNames)},
               {"nvls", n.nvls},
               {"pxn", n.pxn}};
  if (n.p2p_max_Bps > 0) nccl["p2p_max_bw"] = n.p2p_max_Bps;
  const auto& rt = p.runtime;
  json runtime = {{"kernel_launch", rt.kernel_launch_s}, {"host_op", rt.host_op_s}, {"graphs", rt.graphs},
                  {"ring_step_sync", rt.ring_step_sync_s}, {"nccl_launch", rt.nccl_launch_s}};
  // -1 (the stack decides the host ops) is what a runtime mapping without the key reads as.
  if (rt.ops_per_attention >= 0) runtime["ops_per_attention"] = rt.ops_per_attention;
  return {{"name", p.name},
          {"gpu", gpu},
          {"nodes", p.nodes},
          {"gpus_per_node", p.gpus_per_node},
          {"intra", intra},
          {"network", network},
          {"nccl", nccl},
          {"compute_interference", p.compute_interference},
          {"runtime", runtime}};
}

json model(const scenario::ModelSpec& m) {
  json pattern = json::array();
  for (size_t i = 0; i < m.pattern.size(); ++i)
    pattern.push_back(m.pattern[i] == scenario::LayerKind::LinearAttention ? "linear"
                      : i < m.pattern_sliding.size() && m.pattern_sliding[i] ? "sliding"
                                                                             : "full");
  json j = {{"name", m.name},       {"layers", m.layers},   {"hidden", m.hidden},
            {"heads_q", m.heads_q}, {"heads_kv", m.heads_kv}, {"head_dim", m.head_dim},
            {"ffn_hidden", m.ffn_hidden}, {"vocab", m.vocab}, {"tied_embeddings", m.tied_embeddings},
            {"pattern", pattern}};
  json attention = {{"mask", name_of(m.attention_mask, scenario::kModelMaskNames)}};
  if (m.window > 0) attention["window"] = m.window;
  j["attention"] = attention;
  if (m.linear_heads_v > 0)
    j["linear_attention"] = {{"heads_v", m.linear_heads_v}, {"heads_k", m.linear_heads_k},
                             {"key_dim", m.linear_key_dim}, {"value_dim", m.linear_value_dim},
                             {"conv_width", m.linear_conv_width}};
  // Given, it replaces the computed count in the memory accounting; 0 = computed.
  if (m.total_params > 0) j["total_params"] = m.total_params;
  j["attention_type"] = m.mla ? "mla" : "gqa";
  if (m.mla)
    j["mla"] = {{"q_lora_rank", m.mla_dims.q_lora_rank}, {"kv_lora_rank", m.mla_dims.kv_lora_rank},
                {"qk_nope_head_dim", m.mla_dims.qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla_dims.qk_rope_head_dim}, {"v_head_dim", m.mla_dims.v_head_dim}};
  const auto& e = m.moe;
  if (e.experts > 0)
    j["moe"] = {{"experts", e.experts},
                {"top_k", e.top_k},
                {"expert_ffn_hidden", e.expert_ffn_hidden},
                {"shared_experts", e.shared_experts},
                {"shared_expert_ffn_hidden", e.shared_expert_ffn_hidden},
                {"first_dense_layers", e.first_dense_layers},
                {"capacity_factor", e.capacity_factor},
                {"router_skew", e.router_skew}};
  return j;
}

json training(const scenario::TrainingSpec& t) {
  json j = {{"seq_len", t.seq_len},
            {"micro_batch", t.micro_batch},
            {"micro_batches", t.micro_batches},
            {"recompute", name_of(t.recompute, scenario::kRecomputeNames)},
            {"loss", name_of(t.loss, scenario::kLossNames)},
            {"precision", name_of(t.fp8 ? 1 : 0, scenario::kPrecisionNames)}};
  if (t.fp8) j["fp8_attention"] = t.fp8_attention;
  if (t.fp8) j["fp8_recipe"] = name_of(t.fp8_recipe, scenario::kFp8RecipeNames);
  j["stack"] = name_of(t.stack, scenario::kStackNames);
  // The keys below only when set: each is refused without the recompute mode it refines.
  if (t.recompute == scenario::Recompute::Full &&
      (t.recompute_method != scenario::TrainingSpec::RecomputeMethod::Uniform || t.recompute_layers != 1)) {
    j["recompute_method"] = t.recompute_method == scenario::TrainingSpec::RecomputeMethod::Block ? "block" : "uniform";
    j["recompute_layers"] = t.recompute_layers;
  }
  if (t.selective_ac == scenario::TrainingSpec::SelectiveAc::Op) j["selective_ac_option"] = "op";
  if (t.selective_ac == scenario::TrainingSpec::SelectiveAc::Layer) j["selective_ac_option"] = t.selective_ac_every;
  if (t.offload_layers > 0) j["offload_layers"] = t.offload_layers;
  if (t.optimizer_offload_fraction > 0) {
    j["optimizer_cpu_offload"] = true;
    j["optimizer_offload_fraction"] = t.optimizer_offload_fraction;
  }
  if (!t.doc_distribution.empty())
    j["documents"] = {{"distribution", t.doc_distribution}, {"mean", t.doc_mean_tokens}, {"seed", t.doc_seed}};
  else if (!t.documents.empty())
    j["documents"] = t.documents;
  return j;
}

json parallel(const scenario::ParallelSpec& pa) {
  const auto& a = pa.attention;
  return {{"tp", pa.tp},
          {"cp", pa.cp},
          {"pp", pa.pp},
          {"dp", pa.dp},
          {"sequence_parallel", pa.sequence_parallel},
          {"order", pa.order},
          {"virtual_stages", pa.virtual_stages},
          {"zero_stage", pa.zero_stage},
          {"dp_replicate", pa.dp_replicate},
          {"dp_bucket", pa.dp_bucket_bytes > 0 ? nlohmann::json(pa.dp_bucket_bytes) : nlohmann::json("auto")},
          {"overlap_grad_reduce", pa.overlap_grad_reduce},
          {"overlap_param_gather", pa.overlap_param_gather},
          {"align_param_gather", pa.align_param_gather},
          {"grad_reduce_dtype", pa.grad_reduce_fp32 ? "fp32" : "bf16"},
          {"reshard_after_forward", pa.reshard_after_forward == scenario::ParallelSpec::Reshard::Default
                                        ? "default"
                                        : (pa.reshard_after_forward == scenario::ParallelSpec::Reshard::Always
                                               ? "always"
                                               : "never")},
          {"ep", pa.ep},
          {"expert_tp", pa.expert_tp},
          {"tp_comm_overlap", pa.tp_comm_overlap},
          {"attention", {{"scheme", name_of(a.scheme, scenario::kSchemeNames)},
                         {"layout", name_of(a.layout, scenario::kLayoutNames)},
                         {"stripe_width", a.stripe_width},
                         {"ulysses_degree", a.ulysses_degree},
                         {"ulysses_placement", name_of(a.ulysses_placement, scenario::kUlyssesPlacementNames)},
                         {"replicate_kv_heads", a.replicate_kv_heads},
                         {"dkv_fp32", a.dkv_fp32},
                         {"inner_ring", a.inner_ring},
                         {"document_sharding",
                          name_of(a.per_document_sharding ? 1 : 0, scenario::kDocumentShardingNames)}}},
          {"linear_attention", {{"scheme", name_of(pa.linear, scenario::kLinearSchemeNames)}}}};
}

json perturb(const scenario::PerturbSpec& pe) {
  json slow = json::object(), slow_nodes = json::object(), links = json::array();
  for (const auto& [k, v] : pe.gpu_slowdown) slow[std::to_string(k)] = v;
  for (const auto& [k, v] : pe.node_slowdown) slow_nodes[std::to_string(k)] = v;
  for (const auto& l : pe.links)
    links.push_back({{"gpu", l.gpu}, {"link", name_of(l.link, scenario::kPerturbLinkNames)},
                     {"direction", name_of(l.direction, scenario::kLinkDirectionNames)},
                     {"bw_factor", l.bw_factor}, {"add_latency", l.add_latency_s}});
  json j = {{"slow_gpus", slow},
            {"slow_nodes", slow_nodes},
            {"jitter_cv", pe.jitter_cv},
            {"jitter_dist", name_of(pe.jitter_dist, scenario::kJitterDistNames)},
            {"gpu_variation_cv", pe.gpu_variation_cv},
            {"links", links},
            {"rails_down", pe.rails_down}};
  // < 0: the platform's compute_interference applies (not a value the loader takes).
  if (pe.interference >= 0) j["interference"] = pe.interference;
  return j;
}

/// memory.allocator: only what the scenario set (the rest is the stack's default).
json memory(const scenario::MemorySpec& m) {
  json a = json::object();
  if (m.allocator.expandable_segments >= 0) a["expandable_segments"] = m.allocator.expandable_segments == 1;
  if (m.allocator.fragmentation >= 0) a["fragmentation"] = m.allocator.fragmentation;
  return {{"allocator", a}};
}

}  // namespace

json scenario_json(const scenario::Scenario& sc) {
  const auto& sim = sc.simulation;
  return {{"name", sc.name},
          {"mode", name_of(sc.mode, scenario::kModeNames)},
          {"platform", platform(sc.platform)},
          {"model", model(sc.model)},
          {"training", training(sc.training)},
          {"parallel", parallel(sc.parallel)},
          {"simulation", {{"engine", name_of(sim.engine, scenario::kEngineNames)},
                          {"scope", name_of(sim.scope, scenario::kScopeNames)},
                          {"seed", sim.seed},
                          {"collectives", name_of(sim.collectives, scenario::kCollectiveModelNames)},
                          {"symmetry", name_of(sim.symmetry, scenario::kSymmetryNames)}}},
          {"cost", {{"profile", sc.cost.profile},
                    {"attention_kernel", scenario::impl_name(sc.cost.attention_kernel)}}},
          {"perturb", perturb(sc.perturb)},
          {"memory", memory(sc.memory)}};
}

}  // namespace cpsim::report
