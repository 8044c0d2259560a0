#pragma once
/// Plain validated structs produced by the scenario stage. Every quantity is in SI units
/// (bytes, seconds, bytes per second, FLOP/s) and carries its unit in its name.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scenario/attention_kernel.hpp"

namespace cpsim::scenario {

/// One GPU model (platforms/*.yaml `gpu:` or a named GPU preset).
struct GpuSpec {
  std::string name;                 ///< "H100-SXM"
  double peak_flops = 0;            ///< dense BF16 peak, FLOP/s
  double gemm_flops = 0;            ///< best measured BF16 GEMM, FLOP/s (roofline plateau)
  double hbm_Bps = 0;               ///< measured HBM bandwidth, bytes/s
  double memory_bytes = 0;          ///< HBM capacity, bytes
  /// Streaming multiprocessors, for wave quantization of kernels (H100 SXM: 132; A100: 108).
  int sm_count = 132;
  /// Architecture: picks the attention kernel `cost.attention_kernel: auto` means.
  GpuArch arch = GpuArch::Hopper;
  double fp8_peak_flops = 0;        ///< dense FP8 peak, FLOP/s (0 = no FP8 tensor cores)
  double fp8_gemm_flops = 0;        ///< best measured FP8 GEMM, FLOP/s (0 = no FP8)
};

/// Per-direction link class (every link is modelled split-duplex: one link per direction).
struct LinkSpec {
  double bw_Bps = 0;       ///< nominal per-direction bandwidth
  double latency_s = 0;    ///< one-way wire + switch latency
  double efficiency = 1;   ///< fraction of nominal bandwidth NCCL-style transfers reach
};

enum class IntraFabric { NVSwitch, PCIe };

/// NCCL cost facts used by the collective model (calibration.md, NCCL tuning.cc).
struct NcclSpec {
  /// base latency per collective launch, seconds, per protocol (LL, LL128, Simple)
  double base_latency_s[3] = {6.6e-6, 14.0e-6, 8.4e-6};
  /// per-hop latency on NVLink / PCIe / network, per protocol
  double hop_nvlink_s[3] = {0.6e-6, 1.9e-6, 3.4e-6};
  double hop_pcie_s[3] = {1.0e-6, 2.5e-6, 5.7e-6};
  double hop_net_s[3] = {2.7e-6, 4.0e-6, 14.0e-6};
  /// data bytes per wire byte for each protocol (LL 0.5, LL128 120/128, Simple 1)
  double protocol_efficiency[3] = {0.5, 120.0 / 128.0, 1.0};
  /// cap of one NCCL send/recv pair (p2p uses few channels); 0 = no cap
  double p2p_max_Bps = 0;
  /// fixed software latency of one p2p send/recv
  double p2p_latency_s = 0;
  /// GPU generation as NCCL's tuner indexes its tables (tuning.cc NCCL_*_COMPCAP_IDX):
  /// 0 Volta, 1 Ampere (and Ada), 2 Hopper, 3 Blackwell.
  int arch = 2;
  /// NVLink SHARP (NVLS) available: NVSwitch generation 3+ (H100/H200 HGX, GB200 NVL72).
  bool nvls = false;
  /// PXN (NCCL_PXN_DISABLE=0, NCCL_P2P_PXN_LEVEL=2, NCCL's defaults): a send to a GPU of
  /// another node leaves through the NIC on the receiver's rail, reached over NVLink through the
  /// local GPU on that rail (src/graph/paths.cc ncclTopoGetNetDev), instead of crossing rails
  /// at the spine.
  bool pxn = true;
};

/// Fixed software costs of a training framework (platform `runtime:`, see
/// docs/scenario-format.md and docs/cost-model.md for the sources of the defaults). Zero in a
/// programmatic spec; a platform file gets kRuntimeDefaults unless it says otherwise.
struct RuntimeSpec {
  double kernel_launch_s = 0;   ///< host cost of one cudaLaunchKernel (under CUDA graphs: one graph launch)
  double host_op_s = 0;         ///< host cost of one eager framework op (dispatch, autograd, its launch)
  /// Framework ops around one attention kernel call: -1, the training stack decides them and the
  /// layer's other host ops (model/host_ops.hpp); a count replaces them by that many eager ops
  /// plus one kernel launch per attention call.
  int ops_per_attention = 0;
  bool graphs = false;          ///< CUDA graphs: per-op host costs vanish (one graph launch per layer pass)
  double ring_step_sync_s = 0;  ///< per ring step: event record + stream wait before the kernel
  double nccl_launch_s = 0;     ///< per NCCL collective and rank: host launch of its kernel
};

/// Measured and public figures (docs/cost-model.md, "Fixed overheads"): cudaLaunchKernel 1-3 us
/// on CUDA 12 drivers; one eager PyTorch op 10.3 us of host time (dispatch + launch of a tiny
/// elementwise op with the GPU idle, measured on an H200 host by tools/bench_block.py:
/// kernels/profiles/h200-block-measured.csv row tiny-op), inside the public 5-25 us per op
/// (J. Lin, "From PyTorch op to kernel launch", layer table); the stack decides the ops (-1);
/// one event record + cudaStreamWaitEvent per ring step, and NCCL's host-side group launch,
/// each a few microseconds.
inline constexpr RuntimeSpec kRuntimeDefaults{3e-6, 10.3e-6, -1, false, 5e-6, 5e-6};

/// A cluster: nodes of GPUs joined by an intra-node fabric and (if nodes > 1) a rail-optimised
/// leaf/spine network.
struct PlatformSpec {
  std::string name;              ///< preset name or file stem
  std::string file;              ///< where it was read from
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  IntraFabric intra = IntraFabric::NVSwitch;
  LinkSpec nvlink;               ///< NVSwitch: GPU <-> switch, one per GPU per direction
  /// GPUs that share one NVLink domain (8 for DGX, 72 for NVL72). Must be a multiple of
  /// gpus_per_node; GPUs in the same domain talk over NVLink even across nodes.
  int nvlink_domain_gpus = 8;
  // PCIe tree: GPUs behind PCIe switches under CPU root complexes.
  LinkSpec pcie;                 ///< GPU <-> PCIe switch
  LinkSpec pcie_uplink;          ///< PCIe switch <-> CPU root complex
  LinkSpec cpu_link;             ///< root complex <-> root complex (UPI / xGMI)
  int gpus_per_pcie_switch = 2;
  int pcie_switches_per_cpu = 2;
  // Inter-node network (rail-optimised leaf/spine).
  int nics_per_node = 0;
  LinkSpec nic;                  ///< NIC <-> leaf switch port, per direction
  int nodes_per_leaf = 32;       ///< nodes under one rail leaf switch
  int spines = 1;
  double oversubscription = 1.0; ///< leaf downlink : uplink bandwidth ratio
  double switch_latency_s = 0;   ///< per switch traversal
  NcclSpec nccl;
  RuntimeSpec runtime;           ///< fixed software overheads (zero unless a file sets them)
  /// Compute slowdown while a transfer of the same GPU is in flight (SM and HBM contention
  /// with NCCL kernels); 0 = ideal overlap. Presets use 0.19, the average measured slowdown of
  /// overlapped compute over A100/H100 (calibration.md).
  double compute_interference = 0;

  int total_gpus() const { return nodes * gpus_per_node; }
};

/// A transformer layer kind.
enum class LayerKind { FullAttention, LinearAttention };
/// The mask of a softmax-attention layer.
enum class AttentionMask { Causal, Full, SlidingWindow };
/// Whole training steps, or the forward-only prefill of inference (time to first token).
enum class Mode { Train, Prefill };
/// How the loss is computed: the whole logits tensor at once, or a chunk of tokens at a time
/// (Liger's fused linear cross-entropy, Megatron's fused CE).
enum class Loss { Materialized, Chunked };
/// Which framework runs the layer (training.stack): it decides the memory-bound kernels a layer
/// launches (fused or not), which attention kernel `auto` means, and their launch overheads.
/// Megatron-Core with TransformerEngine; PyTorch eager (torchtitan without torch.compile);
/// PyTorch with torch.compile (torchtitan's per-block compile).
enum class Stack : uint8_t { MegatronTe, TorchEager, TorchCompile };
/// TransformerEngine's FP8 recipe (training.fp8_recipe): per-tensor scaling from an amax history
/// (DelayedScaling) or from the tensor itself (Float8CurrentScaling); DeepSeek-V3-style blocks
/// (Float8BlockScaling: 1x128 activations and gradients, 128x128 weights); on Blackwell MXFP8
/// (1x32 blocks, E8M0 scales) and NVFP4 (FP4 E2M1, 1x16 blocks with E4M3 scales).
enum class Fp8Recipe : uint8_t { Delayed, Tensorwise, Blockwise, Mxfp8, Nvfp4 };

/// Mixture-of-experts MLP (model YAML `moe:`); experts == 0 = dense model.
struct MoeSpec {
  int experts = 0;                 ///< routed experts per MoE layer
  int top_k = 0;                   ///< experts each token is routed to
  int expert_ffn_hidden = 0;       ///< SwiGLU intermediate size of one routed expert
  int shared_experts = 0;          ///< always-active experts (a dense MLP of their combined width)
  int shared_expert_ffn_hidden = 0;///< intermediate size of one shared expert (0 = expert_ffn_hidden)
  int first_dense_layers = 0;      ///< leading layers with a dense MLP of ffn_hidden
  double capacity_factor = 0;      ///< tokens an expert takes = cf x uniform share; 0 = dropless
  double router_skew = 0;          ///< 0 = uniform routing; > 0: seeded imbalanced routing
};

/// Multi-head latent attention (DeepSeek-V2/V3; model YAML `mla:`).
struct MlaSpec {
  int q_lora_rank = 0;             ///< 0 = no query compression (a plain hidden -> heads projection)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

/// A model (scenarios/models/*.yaml).
struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;
  int ffn_hidden = 0;            ///< SwiGLU intermediate size
  int vocab = 0;
  bool tied_embeddings = false;
  /// gated attention (Qwen3-Next style): the query projection also produces an output gate
  bool attention_output_gate = false;
  /// layer pattern: kinds repeated to fill `layers` (e.g. linear, linear, linear, full)
  std::vector<LayerKind> pattern = {LayerKind::FullAttention};
  // Linear attention (Gated DeltaNet) geometry.
  int linear_heads_v = 0;        ///< value heads, each with a key_dim x value_dim state
  int linear_heads_k = 0;
  int linear_key_dim = 128;
  int linear_value_dim = 128;
  int linear_conv_width = 4;
  /// total parameter count for memory accounting when the text stack is not all; 0 = computed
  double total_params = 0;
  /// Mask of the softmax-attention layers (`attention: {mask, window}`): causal (decoders),
  /// full (bidirectional, encoders) or a causal sliding window of `window` tokens (query i sees
  /// keys i - window < j <= i, as Mistral's and Gemma's local layers do).
  AttentionMask attention_mask = AttentionMask::Causal;
  int64_t window = 0;
  /// Per pattern entry: 1 for a `sliding` entry (a softmax layer with the causal window
  /// `window` whatever attention_mask says); empty = no sliding entries.
  std::vector<char> pattern_sliding;
  MoeSpec moe;                   ///< experts == 0: every MLP is dense
  /// attention_type: mla. The attention kernel then sees heads_kv = heads_q and head_dim =
  /// (qk_nope + qk_rope + v) / 2, which gives MLA's exact FLOPs and K,V bytes (moe.hpp).
  bool mla = false;
  MlaSpec mla_dims;
};

enum class AttentionScheme { Ring, AllGather, Ulysses, Usp, DoubleRing };
enum class Layout { Contiguous, ZigZag, Striped };
enum class LinearScheme { StateAllGather, Relay, AllToAll };
enum class Recompute { None, Selective, Full };
enum class EngineKind { SimGrid, Analytic };
enum class Scope { AttentionLayer, Layer, Step };
enum class UlyssesPlacement { IntraNode, InterNode };

struct AttentionSpec {
  AttentionScheme scheme = AttentionScheme::Ring;
  Layout layout = Layout::ZigZag;
  int stripe_width = 1;          ///< striped layout: tokens per stripe
  int ulysses_degree = 0;        ///< USP: Ulysses degree u (ring degree = cp / u)
  UlyssesPlacement ulysses_placement = UlyssesPlacement::IntraNode;
  bool replicate_kv_heads = true;///< Ulysses with heads_kv < degree
  bool dkv_fp32 = false;         ///< ring backward sends dK,dV in fp32
  int inner_ring = 0;            ///< double ring: inner ring size (0 = GPUs per node)
  /// Zig-zag with packed documents: each document in 2 cp chunks (TransformerEngine's THD
  /// format) instead of the packed sequence as one.
  bool per_document_sharding = true;
};

struct ParallelSpec {
  int tp = 1, cp = 1, pp = 1, dp = 1;
  bool sequence_parallel = true;
  std::vector<std::string> order = {"tp", "cp", "pp", "dp"};  ///< innermost first
  int virtual_stages = 1;
  int zero_stage = 1;
  /// Gradient bucket in bytes of reduced gradients; 0 = Megatron's default, max(40M, 1M x dp)
  /// parameters (model/data_parallel.hpp).
  double dp_bucket_bytes = 0;
  /// Megatron's DDP (distributed_data_parallel_config.py, all false by default): reduce each
  /// bucket as soon as the backward fills it (else one reduction after the whole backward),
  /// gather the updated weights bucket by bucket ahead of the next forward (else all at once
  /// after the optimizer step; needs zero_stage 1-2 and overlap_grad_reduce), and launch every
  /// pipeline stage's first gather at the step's start (else when the stage first needs it).
  bool overlap_grad_reduce = false;
  bool overlap_param_gather = false;
  bool align_param_gather = false;
  /// Gradients accumulated and reduced in fp32: Megatron forces it for bf16 training unless
  /// --grad-reduce-in-bf16 (arguments.py); torchtitan's FSDP2 MixedPrecisionPolicy reduce_dtype.
  bool grad_reduce_fp32 = true;
  /// FSDP (zero_stage 3) per block, torchtitan's reshard_after_forward_policy: Default frees
  /// each block's gathered weights after its forward (gathered again for the backward) except
  /// the last block's, and under pipeline parallelism frees none (torchtitan parallelize.py).
  enum class Reshard { Default, Always, Never };
  Reshard reshard_after_forward = Reshard::Default;
  /// HSDP (FSDP2's fully_shard over a 2-D (replicate, shard) mesh; torchtitan's
  /// data_parallel_replicate_degree): dp splits into dp_replicate replicas (outer) of
  /// dp / dp_replicate ranks (inner) that shard the parameters, gradients and optimizer states
  /// (x cp); gathers stay in the shard group and the reduce-scattered gradient shard is
  /// all-reduced across the replicas (_fsdp_collectives.py foreach_reduce, all_reduce_group).
  int dp_replicate = 1;
  /// The FSDP shard degree over dp: dp / dp_replicate.
  int dp_shard() const { return dp / dp_replicate; }
  AttentionSpec attention;
  LinearScheme linear = LinearScheme::StateAllGather;
  /// Expert parallelism (Megatron): EP groups are carved out of the DP x CP ranks (x TP when
  /// expert_tp = 1) of one pipeline stage; expert data-parallel = tp*cp*dp / (ep * expert_tp).
  int ep = 1;
  int expert_tp = 1;             ///< 1, or tp (experts split over the TP group like dense MLPs)
  /// Overlap the sequence-parallel TP all-gather / reduce-scatter with the GEMMs they feed
  /// in tp chunks (Megatron --tp-comm-overlap, TransformerEngine userbuffers).
  bool tp_comm_overlap = false;
};

struct TrainingSpec {
  int64_t seq_len = 0;           ///< tokens per sequence
  int micro_batch = 1;           ///< sequences per micro-batch
  int micro_batches = 1;         ///< gradient accumulation steps per optimizer step
  Recompute recompute = Recompute::Full;
  /// Megatron's --recompute-method with recompute full and --recompute-num-layers N:
  /// Uniform checkpoints the input of every group of N consecutive layers of a model chunk and
  /// recomputes them all (N = 1 is cpsim's plain full recomputation); Block checkpoints only
  /// the first N layers of each model chunk and keeps the rest's activations
  /// (transformer_block.py, _checkpointed_forward).
  enum class RecomputeMethod { Uniform, Block };
  RecomputeMethod recompute_method = RecomputeMethod::Uniform;
  int recompute_layers = 1;
  /// What recompute: selective saves. CoreAttention: Megatron's --recompute-granularity
  /// selective (the core attention recomputed). torchtitan's activation_checkpoint.mode
  /// selective with selective_ac_option (torchtitan/distributed/activation_checkpoint.py):
  /// Op ("op") saves the outputs of the mm, SDPA and reduce-scatter ops except every second mm
  /// of a block and recomputes the rest; Layer (a positive integer N) wraps every Nth block of
  /// a rank's stage in full checkpointing and leaves the others whole.
  enum class SelectiveAc { CoreAttention, Op, Layer };
  SelectiveAc selective_ac = SelectiveAc::CoreAttention;
  int selective_ac_every = 0;    ///< Layer: N
  /// Activation CPU offloading (Megatron --cpu-offloading-num-layers, TransformerEngine's
  /// get_cpu_offload_context): the first N layers' saved activations go to host memory in the
  /// forward and come back for the backward.
  int offload_layers = 0;
  /// Optimizer CPU offload (Megatron --optimizer-cpu-offload --optimizer-offload-fraction F,
  /// megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py): the fp32 master weights and
  /// Adam m, v of the first F of each rank's optimizer parameters live in pinned host memory
  /// and are stepped by a CPU Adam; their fp32 gradients go to the host and the updated
  /// weights come back each step. 0 = off.
  double optimizer_offload_fraction = 0;
  /// packed documents: lengths summing to seq_len (empty = one document)
  std::vector<int64_t> documents;
  /// or documents drawn from a distribution ("uniform", "lognormal"; empty = none)
  std::string doc_distribution;
  int64_t doc_mean_tokens = 0;
  uint64_t doc_seed = 1;
  Loss loss = Loss::Materialized;
  /// GEMM precision: false = BF16; true = FP8 (TransformerEngine delayed/current scaling).
  bool fp8 = false;
  bool fp8_attention = false;    ///< attention kernels in FP8 too (only with fp8)
  Fp8Recipe fp8_recipe = Fp8Recipe::Delayed;  ///< with fp8: how tensors are scaled
  Stack stack = Stack::MegatronTe;            ///< the framework whose kernels a layer runs
};

/// Which link of a GPU a link perturbation degrades.
enum class PerturbLink { NVLink, PCIe, Nic };
/// Up: leaving the GPU (for a NIC: towards its leaf switch); down: arriving.
enum class LinkDirection { Up, Down, Both };

/// One GPU's link at reduced bandwidth or added latency (a bad cable, a flapping NIC port).
struct LinkPerturb {
  int gpu = 0;                 ///< global GPU index; for `nic`, the NIC of its rail on its node
  PerturbLink link = PerturbLink::NVLink;
  LinkDirection direction = LinkDirection::Both;
  double bw_factor = 1;        ///< multiplies the link's bandwidth (0.5 = halved), > 0
  double add_latency_s = 0;    ///< added to the link's one-way latency, >= 0
};

/// Per-kernel jitter: normal, x max(0.5, 1 + cv N(0,1)); lognormal, x exp(mu + sigma N(0,1))
/// with mean 1 and coefficient of variation cv exactly (a right tail, never below 0).
enum class JitterDist { Normal, LogNormal };

struct PerturbSpec {
  std::map<int, double> gpu_slowdown;   ///< rank -> factor (1.2 = 20 % slower)
  std::map<int, double> node_slowdown;  ///< node -> factor for each of its GPUs (times slow_gpus)
  double jitter_cv = 0;                 ///< per-kernel multiplicative noise, coefficient of variation
  JitterDist jitter_dist = JitterDist::Normal;
  double gpu_variation_cv = 0;          ///< static per-GPU variation drawn once per run
  double interference = -1;             ///< compute slowdown while comm overlaps; <0 = platform default
  std::vector<LinkPerturb> links;       ///< degraded links, applied by model::Topology
  std::vector<int> rails_down;          ///< NIC rails out of service (sorted, unique)
  /// Internal, never read from a file (the straggler what-if): this rank runs at nominal speed,
  /// without slowdown, static variation or jitter, while every other rank's draws stay the same.
  int neutral_rank = -1;

  /// slow_gpus times slow_nodes per GPU (GPU g is on node g / gpus_per_node): the per-rank
  /// factors schedule::ComputeNoise applies through gpu_slowdown.
  std::map<int, double> gpu_factors(int gpus_per_node) const {
    std::map<int, double> f = gpu_slowdown;
    for (const auto& [node, factor] : node_slowdown)
      for (int g = node * gpus_per_node; g < (node + 1) * gpus_per_node; ++g)
        f[g] = f.count(g) ? f[g] * factor : factor;
    return f;
  }
  /// Whether anything makes single GPUs or links differ from the nominal ones. Factors of 1,
  /// zero spreads and zero latencies are nothing; interference, the same on every GPU, is not
  /// counted.
  bool any() const {
    auto slowed = [](const std::map<int, double>& m) {
      for (const auto& kv : m)
        if (kv.second != 1) return true;
      return false;
    };
    bool link = false;
    for (const auto& l : links) link = link || l.bw_factor != 1 || l.add_latency_s != 0;
    return slowed(gpu_slowdown) || slowed(node_slowdown) || link || jitter_cv > 0 ||
           gpu_variation_cv > 0 || !rails_down.empty();
  }
};

enum class CollectiveModel { Auto, Steps, Pipelined };
enum class Symmetry { Auto, Off };

struct SimulationSpec {
  EngineKind engine = EngineKind::SimGrid;
  Scope scope = Scope::Step;
  uint64_t seed = 1;
  /// Ring collectives as their n-1 (or 2(n-1)) algorithm steps, or pipelined as one transfer
  /// per rank after all members joined (same time without contention, n-1 times fewer ops).
  /// Auto: steps up to 512 GPUs, pipelined beyond.
  CollectiveModel collectives = CollectiveModel::Auto;
  /// Auto: simulate one data-parallel replica for those that cannot differ, and every replica
  /// a localised perturbation touches (see step.cpp).
  Symmetry symmetry = Symmetry::Auto;
  /// Internal, never read from a file: build one data-parallel replica and copy its ops for the
  /// others where the copy is exact (schedule/step.cpp); off builds every replica (tests).
  bool copy_replicas = true;
  /// Internal, never read from a file: scope attention-layer builds the first TP rank's CP group
  /// only. `cpsim plan` sets it for its analytic screen of unperturbed ring-family layers, whose
  /// TP ranks' groups are the same P2P graph on other GPUs, timed alone by the analytic engine
  /// (tests/engine/one_tp_group_test.cpp holds the times equal).
  bool one_tp_group = false;
  /// Internal, never read from a file: the most ops the build may add (0 = no limit; see
  /// schedule::OpLimitExceeded). `cpsim plan` bounds each child's graph by its memory share.
  uint64_t max_ops = 0;
  /// Internal, never read from a file: the graph is replayed by the analytic engine for its
  /// step time alone (app's step_time), so a lockstep collective's transfers between two GPUs
  /// of replicas that are not built can go, but for those that set its pace
  /// (schedule/lean_lanes.cpp).
  bool lean_collectives = false;
  /// Internal: with lean_collectives, build TP index 0 of each TP group alone where the others
  /// time the same (schedule/replicas.hpp tp_mirror); off in the tests that hold the two equal.
  bool mirror_tp = true;
  /// Internal: a full graph with replica symmetry marks the GPUs of the replicas it does not
  /// build as bystanders (TaskGraph::set_bystanders: their NCCL launches as one op per pipelined
  /// ring); off in the test that holds the two equal.
  bool bystanders = true;
  /// Internal: what a copied replica's op counts for against max_ops (it is not stored; see
  /// schedule::TaskGraph::set_op_limit).
  double copied_op_weight = 1;
};

struct CostSpec {
  std::string profile = "auto";   ///< "auto", "none" (roofline only) or a CSV path
  /// The attention kernel the run calls (auto: the best for the GPU's architecture); picks the
  /// bundled profile <gpu>-<impl>-*.csv, the tile shapes and the roofline plateau.
  AttnImpl attention_kernel = AttnImpl::Auto;
  /// training.stack, copied at load: how the unfused path runs (Megatron's or PyTorch's).
  Stack stack = Stack::MegatronTe;
};

/// A fully resolved scenario.
/// PyTorch's caching allocator as the run configures it (`memory.allocator`, the
/// PYTORCH_CUDA_ALLOC_CONF a user sets); -1 = the stack's default (model/allocator.cpp).
struct AllocatorSpec {
  int expandable_segments = -1;  ///< -1 default, 0 off, 1 on
  double fragmentation = -1;     ///< share of the reserved peak in free blocks; -1 default
};
struct MemorySpec {
  AllocatorSpec allocator;
};

struct Scenario {
  std::string name;
  std::string file;
  PlatformSpec platform;
  ModelSpec model;
  TrainingSpec training;
  ParallelSpec parallel;
  SimulationSpec simulation;
  CostSpec cost;
  PerturbSpec perturb;
  MemorySpec memory;
  Mode mode = Mode::Train;
};

}  // namespace cpsim::scenario
