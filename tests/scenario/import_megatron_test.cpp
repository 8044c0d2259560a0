// Megatron-LM / NeMo arguments -> scenario: the issue's acceptance command loads, the
// cp_comm_type table holds, dp / micro-batches / virtual stages are computed, unknown arguments
// are reported, and bad values point at their column in the command line.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "scenario/import_megatron.hpp"
#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

Scenario load(const std::string& args) {
  const MegatronImport imp = import_megatron(split(args));
  return parse_scenario(imp.yaml, "megatron.yaml");
}

std::string error_of(const std::string& args) {
  try {
    import_megatron(split(args));
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

/// The scalar at a dotted key path of a YAML text, or "(absent)".
std::string at(const std::string& yaml, const std::string& path) {
  const detail::Node root = detail::parse_text(yaml, "s.yaml", "");
  const detail::Node* n = &root;
  std::istringstream in(path);
  for (std::string k; n != nullptr && std::getline(in, k, '.');) n = n->find(k);
  return n == nullptr ? "(absent)" : n->scalar;
}

const std::string kAcceptance =
    "--tensor-model-parallel-size 2 --context-parallel-size 4 --cp-comm-type a2a+p2p "
    "--hierarchical-context-parallel-sizes 2 2 --seq-length 131072 --micro-batch-size 1 --global-batch-size 16 "
    "--sequence-parallel --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
    "--use-distributed-optimizer --bf16 --model qwen3.8-27b --platform h100-cluster --nnodes 2 "
    "--nproc-per-node 8 --lr 1e-4 --train-iters 100 --log-interval 1";

const std::string kLlama8b =
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8 "
    "--ffn-hidden-size 14336 --swiglu --vocab-size 128256 --untie-embeddings-and-output-weights --seq-length 65536 ";

}  // namespace

TEST(ImportMegatron, TheIssuesAcceptanceCommandLoads) {
  const MegatronImport imp = import_megatron(split(kAcceptance));
  const Scenario s = parse_scenario(imp.yaml, "megatron.yaml");
  EXPECT_EQ(s.model.name, "qwen3.8-27b");
  EXPECT_EQ(s.platform.total_gpus(), 16);
  EXPECT_EQ(s.training.seq_len, 131072);
  EXPECT_EQ(s.training.micro_batch, 1);
  EXPECT_EQ(s.training.micro_batches, 8);  // 16 / (1 * dp 2)
  EXPECT_EQ(s.training.recompute, Recompute::Full);
  const ParallelSpec& p = s.parallel;
  EXPECT_EQ(p.tp, 2);
  EXPECT_EQ(p.cp, 4);
  EXPECT_EQ(p.pp, 1);
  EXPECT_EQ(p.dp, 2);  // 16 GPUs / (2 * 4 * 1)
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.zero_stage, 1);
  EXPECT_EQ(p.order, (std::vector<std::string>{"tp", "cp", "dp", "pp"}));
  EXPECT_EQ(p.attention.scheme, AttentionScheme::Usp);
  EXPECT_EQ(p.attention.ulysses_degree, 2);
  EXPECT_EQ(p.attention.ulysses_placement, UlyssesPlacement::IntraNode);
  EXPECT_EQ(p.attention.layout, Layout::ZigZag);
  EXPECT_EQ(imp.not_understood, (std::vector<std::string>{"--lr 1e-4", "--train-iters 100", "--log-interval 1"}));
  EXPECT_NE(imp.yaml.find("# not understood: --lr 1e-4, --train-iters 100, --log-interval 1"), std::string::npos);
}

TEST(ImportMegatron, CpCommTypeTable) {
  const std::string base = kLlama8b + "--context-parallel-size 8 --platform dgx-h100 --cp-comm-type ";
  const Scenario p2p = load(base + "p2p");
  EXPECT_EQ(p2p.parallel.attention.scheme, AttentionScheme::Ring);
  EXPECT_EQ(p2p.parallel.attention.layout, Layout::ZigZag);
  EXPECT_EQ(load(base + "a2a").parallel.attention.scheme, AttentionScheme::Ulysses);
  EXPECT_EQ(load(base + "allgather").parallel.attention.scheme, AttentionScheme::AllGather);
  const Scenario usp = load(base + "a2a+p2p --hierarchical-context-parallel-sizes 4 2");
  EXPECT_EQ(usp.parallel.attention.scheme, AttentionScheme::Usp);
  EXPECT_EQ(usp.parallel.attention.ulysses_degree, 4);
  // Megatron's default is p2p.
  EXPECT_EQ(load(kLlama8b + "--context-parallel-size 8 --platform dgx-h100").parallel.attention.scheme,
            AttentionScheme::Ring);
}

TEST(ImportMegatron, InlineModelFromTheShapeArguments) {
  const Scenario s = load(kLlama8b + "--platform dgx-h100");
  const ModelSpec p = load_model("llama3-8b");
  EXPECT_EQ(s.model.layers, p.layers);
  EXPECT_EQ(s.model.hidden, p.hidden);
  EXPECT_EQ(s.model.heads_q, p.heads_q);
  EXPECT_EQ(s.model.heads_kv, p.heads_kv);
  EXPECT_EQ(s.model.head_dim, p.head_dim);
  EXPECT_EQ(s.model.ffn_hidden, p.ffn_hidden);
  EXPECT_EQ(s.model.vocab, p.vocab);
  EXPECT_FALSE(s.model.tied_embeddings);
  EXPECT_EQ(s.parallel.dp, 8);  // one node, nothing but data parallelism
  EXPECT_EQ(s.training.recompute, Recompute::None);
  // Megatron ties embeddings unless told otherwise, and ignores query groups without GQA.
  const MegatronImport tied = import_megatron(split(
      "--num-layers 2 --hidden-size 512 --num-attention-heads 8 --num-query-groups 2 --vocab-size 1000 "
      "--seq-length 4096 --platform dgx-h100"));
  EXPECT_EQ(at(tied.yaml, "model.tied_embeddings"), "true");
  EXPECT_EQ(at(tied.yaml, "model.heads_kv"), "8");
  EXPECT_EQ(at(tied.yaml, "model.ffn_hidden"), "2048");  // 4 * hidden without --swiglu
}

TEST(ImportMegatron, PipelineVirtualStagesAndWorld) {
  const Scenario s = load(kLlama8b +
                          "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 2 "
                          "--tensor-model-parallel-size 2 --nnodes 4 --nproc-per-node 8 --global-batch-size 64 "
                          "--micro-batch-size 2");
  EXPECT_EQ(s.parallel.pp, 4);
  EXPECT_EQ(s.parallel.virtual_stages, 4);  // 32 layers / pp 4 / 2 per virtual stage
  EXPECT_EQ(s.parallel.dp, 4);              // 32 GPUs / (2 * 1 * 4)
  EXPECT_EQ(s.training.micro_batches, 8);   // 64 / (2 * 4)
  EXPECT_EQ(s.platform.name, "h100-cluster");
}

TEST(ImportMegatron, NemoOverrides) {
  const Scenario s = load(
      "trainer.num_nodes=2 trainer.devices=8 model.tensor_model_parallel_size=2 model.context_parallel_size=4 "
      "model.sequence_parallel=True model.cp_comm_type=a2a+p2p model.hierarchical_context_parallel_sizes=[2,2] "
      "model.encoder_seq_length=131072 model.global_batch_size=4 --model qwen3.8-27b");
  EXPECT_EQ(s.platform.total_gpus(), 16);
  EXPECT_EQ(s.parallel.tp, 2);
  EXPECT_EQ(s.parallel.cp, 4);
  EXPECT_TRUE(s.parallel.sequence_parallel);
  EXPECT_EQ(s.parallel.attention.scheme, AttentionScheme::Usp);
  EXPECT_EQ(s.parallel.attention.ulysses_degree, 2);
  EXPECT_EQ(s.training.seq_len, 131072);
  EXPECT_EQ(s.training.micro_batches, 2);
  const MegatronImport imp = import_megatron(split("model.optim.lr=1e-4 trainer.max_steps=10 --model llama3-8b "
                                                   "--seq-length 8192 --platform dgx-h100"));
  EXPECT_EQ(imp.not_understood, (std::vector<std::string>{"model.optim.lr=1e-4", "trainer.max_steps=10"}));
}

TEST(ImportMegatron, MoeFp8AndOverlapArgumentsBecomeTheAgreedKeys) {
  const MegatronImport imp = import_megatron(split(
      "--num-layers 32 --hidden-size 2048 --num-attention-heads 32 --group-query-attention --num-query-groups 4 "
      "--kv-channels 128 --ffn-hidden-size 6144 --swiglu --vocab-size 151936 --num-experts 128 --moe-router-topk 8 "
      "--moe-ffn-hidden-size 768 --moe-shared-expert-intermediate-size 1024 --moe-layer-freq ([0]*3+[1]*29) "
      "--expert-model-parallel-size 8 --fp8-format hybrid --tp-comm-overlap --tensor-model-parallel-size 2 "
      "--seq-length 131072 --nnodes 2 --moe-expert-capacity-factor 1.25"));
  const std::string& y = imp.yaml;
  EXPECT_EQ(at(y, "model.moe.experts"), "128");
  EXPECT_EQ(at(y, "model.moe.top_k"), "8");
  EXPECT_EQ(at(y, "model.moe.expert_ffn_hidden"), "768");
  EXPECT_EQ(at(y, "model.moe.shared_experts"), "1");
  EXPECT_EQ(at(y, "model.moe.shared_expert_ffn_hidden"), "1024");
  EXPECT_EQ(at(y, "model.moe.first_dense_layers"), "3");
  EXPECT_EQ(at(y, "model.moe.capacity_factor"), "1.25");
  EXPECT_EQ(at(y, "parallel.ep"), "8");
  EXPECT_EQ(at(y, "parallel.expert_tp"), "2");  // Megatron's default: tp
  EXPECT_EQ(at(y, "parallel.tp_comm_overlap"), "true");
  EXPECT_EQ(at(y, "training.precision"), "fp8");
  const MegatronImport mla = import_megatron(split(
      "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --multi-latent-attention --q-lora-rank 384 "
      "--kv-lora-rank 256 --vocab-size 1000 --seq-length 4096 --platform dgx-h100"));
  EXPECT_EQ(at(mla.yaml, "model.attention_type"), "mla");
  EXPECT_EQ(at(mla.yaml, "model.mla.q_lora_rank"), "384");
  EXPECT_EQ(at(mla.yaml, "model.mla.kv_lora_rank"), "256");
  EXPECT_EQ(at(mla.yaml, "model.mla.qk_rope_head_dim"), "64");  // Megatron's default
}

TEST(ImportMegatron, BadArgumentsPointAtTheirColumn) {
  const std::string a = error_of("--context-parallel-size 4 --cp-comm-type a2a+p2p --seq-length 8192");
  EXPECT_EQ(a.rfind("<megatron arguments>:1:42: error: --cp-comm-type: a2a+p2p needs "
                    "--hierarchical-context-parallel-sizes", 0), 0u) << a;
  EXPECT_NE(error_of("--tensor-model-parallel-size two").find(":1:30: error: --tensor-model-parallel-size: "
                                                               "expected an integer >= 1, got 'two'"),
            std::string::npos);
  EXPECT_NE(error_of("--context-parallel-size 8 --cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2")
                .find("2 * 2 != --context-parallel-size 8"),
            std::string::npos);
  EXPECT_NE(error_of(kLlama8b + "--platform dgx-h100 --global-batch-size 12")
                .find("12 is not divisible by micro-batch-size * dp = 1 * 8"),
            std::string::npos);
  EXPECT_NE(error_of(kLlama8b + "--platform dgx-h100 --tensor-model-parallel-size 3")
                .find("tp*cp*pp = 3 does not divide the world size 1 x 8 = 8"),
            std::string::npos);
  EXPECT_NE(error_of(kLlama8b + "--nproc-per-node 4").find("4 GPUs per node, but platform 'h100-cluster' has 8"),
            std::string::npos);
  EXPECT_EQ(error_of("--num-layers 4 --seq-length 4096"),
            "<megatron arguments>: error: --hidden-size: missing; without --model the model comes from the arguments");
  EXPECT_NE(error_of(kLlama8b + "--num-experts 8 --moe-layer-freq [1]*4+[0]*28").find("dense layer after a MoE layer"),
            std::string::npos);
}

TEST(ImportMegatron, PartialRecomputeAndOptimizerOffload) {
  const Scenario s = load(kLlama8b + "--platform dgx-h100 --recompute-granularity full --recompute-method block "
                                     "--recompute-num-layers 4 --use-distributed-optimizer --optimizer-cpu-offload "
                                     "--optimizer-offload-fraction 0.5");
  EXPECT_EQ(s.training.recompute, Recompute::Full);
  EXPECT_EQ(s.training.recompute_method, cpsim::scenario::TrainingSpec::RecomputeMethod::Block);
  EXPECT_EQ(s.training.recompute_layers, 4);
  EXPECT_DOUBLE_EQ(s.training.optimizer_offload_fraction, 0.5);
  // --optimizer-offload-fraction defaults to 1.0 in Megatron.
  EXPECT_DOUBLE_EQ(load(kLlama8b + "--platform dgx-h100 --use-distributed-optimizer --optimizer-cpu-offload")
                       .training.optimizer_offload_fraction,
                   1.0);
}

// --attention-backend unfused / local run the unfused path; it refuses context parallelism.
TEST(ImportMegatron, AttentionBackendUnfused) {
  const std::string base = kLlama8b + "--nnodes 1 --nproc-per-node 8 ";
  EXPECT_EQ(load(base + "--attention-backend unfused").cost.attention_kernel, AttnImpl::Unfused);
  EXPECT_EQ(load(base + "--attention-backend local").cost.attention_kernel, AttnImpl::Unfused);
  EXPECT_EQ(load(base + "--attention-backend fused").cost.attention_kernel, AttnImpl::Cudnn);
  const std::string e = error_of(base + "--context-parallel-size 2 --attention-backend unfused");
  EXPECT_NE(e.find("without context parallelism"), std::string::npos) << e;
  EXPECT_NE(error_of(base + "--attention-backend magic").find("expected flash, fused"), std::string::npos);
}

}  // namespace CPSIM_TEST_TU
