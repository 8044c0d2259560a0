// Hugging Face config.json import: dense configs load end to end as models and scenarios; MoE,
// MLA and sliding-window configs are checked as the YAML they become; bad configs name the file,
// the key and (for bad JSON or a bad value) the line and column.
#include <gtest/gtest.h>

#include <string>

#include "scenario/import_hf.hpp"
#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {

const std::string kHf = std::string(CPSIM_SOURCE_DIR) + "/tests/data/hf/";

/// The scalar at a dotted key path of the imported YAML ("moe.experts"), or "(absent)".
std::string at(const std::string& yaml, const std::string& path) {
  const detail::Node root = detail::parse_text(yaml, "imported.yaml", "");
  const detail::Node* n = &root;
  size_t start = 0;
  while (n != nullptr && start <= path.size()) {
    const size_t dot = path.find('.', start);
    n = n->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (n == nullptr) return "(absent)";
  if (n->is_seq()) {
    std::string s;
    for (const auto& c : n->children) s += (s.empty() ? "" : ",") + c.scalar;
    return "[" + s + "]";
  }
  return n->scalar;
}

std::string error_of(const std::string& json, const std::string& file = "c.json") {
  try {
    import_hf_text(json, file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

/// Each of `want`'s keys has its value in the imported YAML.
void expect_keys(const std::string& y, const std::vector<std::pair<std::string, std::string>>& want) {
  for (const auto& [key, value] : want) EXPECT_EQ(at(y, key), value) << key;
}

TEST(ImportHf, Llama3EightBIsThePreset) {
  const ModelSpec m = load_model("hf:" + kHf + "llama3-8b/config.json");
  const ModelSpec p = load_model("llama3-8b");
  EXPECT_EQ(m.name, "llama");  // no _name_or_path: its model_type, not the directory
  EXPECT_EQ(m.layers, p.layers);
  EXPECT_EQ(m.hidden, p.hidden);
  EXPECT_EQ(m.heads_q, p.heads_q);
  EXPECT_EQ(m.heads_kv, p.heads_kv);
  EXPECT_EQ(m.head_dim, p.head_dim);  // derived hidden / heads, as transformers does
  EXPECT_EQ(m.ffn_hidden, p.ffn_hidden);
  EXPECT_EQ(m.vocab, p.vocab);
  EXPECT_EQ(m.tied_embeddings, p.tied_embeddings);
  EXPECT_EQ(m.pattern, p.pattern);
}

TEST(ImportHf, UnusedKeysAreListedNotDropped) {
  const HfImport imp = import_hf(kHf + "llama3-8b/config.json");
  EXPECT_TRUE(listed(imp.ignored, "rope_theta"));
  EXPECT_TRUE(listed(imp.ignored, "rms_norm_eps"));
  EXPECT_TRUE(listed(imp.ignored, "architectures"));
  EXPECT_TRUE(listed(imp.ignored, "max_position_embeddings"));
  EXPECT_FALSE(listed(imp.ignored, "hidden_size"));
  EXPECT_FALSE(listed(imp.ignored, "rope_scaling"));  // null: no value to ignore
  EXPECT_NE(imp.yaml.find("# ignored: architectures, attention_dropout,"), std::string::npos) << imp.yaml;
  EXPECT_FALSE(listed(imp.ignored, "attention_bias"));  // read: false, so no bias to report
  ASSERT_EQ(imp.notes.size(), 2u);
  EXPECT_NE(imp.notes[0].find("head_dim absent: hidden_size / num_attention_heads = 128"), std::string::npos);
  EXPECT_EQ(imp.notes[1], "_name_or_path absent: the model is named after its model_type, llama");
}

/// Qwen2.5-7B's config.json (Hugging Face Qwen/Qwen2.5-7B), with the _name_or_path that
/// save_pretrained writes.
const char* const kQwen25 = R"({
  "_name_or_path": "Qwen/Qwen2.5-7B",
  "architectures": ["Qwen2ForCausalLM"],
  "hidden_size": 3584,
  "intermediate_size": 18944,
  "max_window_layers": 28,
  "model_type": "qwen2",
  "num_attention_heads": 28,
  "num_hidden_layers": 28,
  "num_key_value_heads": 4,
  "tie_word_embeddings": false,
  "use_sliding_window": false,
  "sliding_window": 131072,
  "vocab_size": 152064
})";

TEST(ImportHf, NameFromNameOrPathNotTheFile) {
  const HfImport imp = import_hf_text(kQwen25, "qwen2.5-7b-config.json");
  EXPECT_EQ(at(imp.yaml, "name"), "Qwen2.5-7B");
  EXPECT_NE(imp.yaml.find("name: Qwen2.5-7B  # _name_or_path"), std::string::npos) << imp.yaml;
  EXPECT_FALSE(listed(imp.ignored, "_name_or_path"));
  std::string bad = kQwen25;
  bad.replace(bad.find("\"Qwen/Qwen2.5-7B\""), 17, "5");
  EXPECT_NE(error_of(bad).find("_name_or_path: expected a string"), std::string::npos) << error_of(bad);
}

TEST(ImportHf, BiasesAreSaidWithTheirWeight) {
  // Qwen2 has Q, K, V biases with no key: (28 + 2 x 4) x 128 = 4,608 per layer, x 28 layers.
  const HfImport imp = import_hf_text(kQwen25, "c.json");
  bool said = false;
  for (const auto& n : imp.notes)
    said |= n == "qwen2 has biases on the Q, K and V projections (no config key): cpsim's model has no bias terms, "
                 "so 129024 parameters (4608 per layer; their FLOPs and bytes are as small) are not counted";
  EXPECT_TRUE(said) << imp.yaml;
  EXPECT_NE(imp.yaml.find("# note: qwen2 has biases"), std::string::npos) << imp.yaml;
  // A key that says so: attention_bias (Q, K, V and O) on a Llama config.
  std::string llama = kQwen25;
  llama.replace(llama.find("\"qwen2\""), 7, "\"llama\"");
  llama.replace(llama.find("{") + 1, 0, "\n  \"attention_bias\": true,");
  const HfImport l = import_hf_text(llama, "c.json");
  said = false;
  for (const auto& n : l.notes) said |= n.starts_with("attention_bias true: the Q, K, V and output projections have biases");
  EXPECT_TRUE(said) << l.yaml;
}

TEST(ImportHf, Qwen3EightB) {
  const ModelSpec m = load_model("hf:" + kHf + "qwen3-8b/config.json");
  EXPECT_EQ(m.layers, 36);
  EXPECT_EQ(m.hidden, 4096);
  EXPECT_EQ(m.heads_q, 32);
  EXPECT_EQ(m.heads_kv, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.ffn_hidden, 12288);
  EXPECT_EQ(m.vocab, 151936);
  EXPECT_EQ(m.pattern, std::vector<LayerKind>{LayerKind::FullAttention});  // use_sliding_window false
}

TEST(ImportHf, AnchorLikeHybridIsTheAnchorModel) {
  // A Qwen3.5 config (language model under text_config) with the anchor's shapes.
  const ModelSpec m = load_model("hf:" + kHf + "qwen3.5-27b-like/config.json");
  const ModelSpec a = load_model("qwen3.8-27b");
  EXPECT_EQ(m.layers, a.layers);
  EXPECT_EQ(m.hidden, a.hidden);
  EXPECT_EQ(m.heads_q, a.heads_q);
  EXPECT_EQ(m.heads_kv, a.heads_kv);
  EXPECT_EQ(m.head_dim, a.head_dim);
  EXPECT_EQ(m.ffn_hidden, a.ffn_hidden);
  EXPECT_EQ(m.vocab, a.vocab);
  EXPECT_EQ(m.pattern, a.pattern);  // full_attention_interval 4 -> [linear, linear, linear, full]
  EXPECT_EQ(m.linear_heads_v, 48);
  EXPECT_EQ(m.linear_heads_k, 16);
  EXPECT_EQ(m.linear_key_dim, 128);
  EXPECT_EQ(m.linear_value_dim, 128);
  EXPECT_EQ(m.linear_conv_width, 4);
  const HfImport imp = import_hf(kHf + "qwen3.5-27b-like/config.json");
  EXPECT_EQ(imp.model_type, "qwen3_5_text");
  EXPECT_TRUE(listed(imp.ignored, "vision_config"));
  EXPECT_TRUE(listed(imp.ignored, "text_config.partial_rotary_factor"));
  EXPECT_FALSE(listed(imp.ignored, "tie_word_embeddings"));  // read at both levels of the wrapper
}

TEST(ImportHf, ScenarioModelFromHfPathRelativeToTheScenario) {
  const std::string text =
      "platform: dgx-h100\nmodel: hf:llama3-8b/config.json\ntraining: {seq_len: 32K}\nparallel: {cp: 8}\n";
  const Scenario s = parse_scenario(text, kHf + "s.yaml");
  EXPECT_EQ(s.model.name, "llama");
  EXPECT_EQ(s.model.ffn_hidden, 14336);
  // --set over an hf: model amends it like a preset.
  const Scenario o = parse_scenario(text, kHf + "s.yaml", {"model.layers=4"});
  EXPECT_EQ(o.model.layers, 4);
  EXPECT_EQ(o.model.hidden, 4096);
}

TEST(ImportHf, MissingHfFileIsReportedAtTheScenarioKey) {
  try {
    parse_scenario("platform: dgx-h100\nmodel: hf:nope/config.json\ntraining: {seq_len: 8K}\n", kHf + "s.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.line(), 2);
    EXPECT_EQ(e.col(), 8);
    EXPECT_NE(std::string(e.what()).find("cannot read Hugging Face config"), std::string::npos) << e.what();
  }
}

TEST(ImportHf, Qwen3MoeKeys) {
  const std::string y = import_hf(kHf + "qwen3-30b-a3b/config.json").yaml;
  expect_keys(y, {{"layers", "48"}, {"heads_kv", "4"}, {"head_dim", "128"}, {"moe.experts", "128"},
                   {"moe.top_k", "8"}, {"moe.expert_ffn_hidden", "768"}, {"moe.shared_experts", "0"},
                   {"moe.first_dense_layers", "0"}, {"pattern", "(absent)"}});
}

TEST(ImportHf, Qwen3NextHybridMoeKeys) {
  const std::string y = import_hf(kHf + "qwen3-next-80b-a3b/config.json").yaml;
  expect_keys(y, {{"pattern", "[linear,linear,linear,full]"}, {"head_dim", "256"},
                   {"linear_attention.heads_v", "32"}, {"linear_attention.heads_k", "16"},
                   {"moe.experts", "512"}, {"moe.top_k", "10"}, {"moe.expert_ffn_hidden", "512"},
                   {"moe.shared_experts", "1"}, {"moe.shared_expert_ffn_hidden", "512"}});
}

TEST(ImportHf, DeepSeekV3MlaAndMoeKeys) {
  const HfImport imp = import_hf(kHf + "deepseek-v3/config.json");
  const std::string& y = imp.yaml;
  expect_keys(y, {{"attention_type", "mla"}, {"mla.q_lora_rank", "1536"}, {"mla.kv_lora_rank", "512"},
                   {"mla.qk_nope_head_dim", "128"}, {"mla.qk_rope_head_dim", "64"}, {"mla.v_head_dim", "128"},
                   {"head_dim", "192"}, {"ffn_hidden", "18432"}, {"moe.experts", "256"}, {"moe.top_k", "8"},
                   {"moe.expert_ffn_hidden", "2048"}, {"moe.shared_experts", "1"},
                   {"moe.shared_expert_ffn_hidden", "2048"}, {"moe.first_dense_layers", "3"}});
  EXPECT_TRUE(listed(imp.ignored, "num_nextn_predict_layers"));  // MTP is not modelled
  EXPECT_TRUE(listed(imp.ignored, "routed_scaling_factor"));
}

TEST(ImportHf, Glm45AirAndMixtralKeys) {
  const std::string g = import_hf(kHf + "glm-4.5-air/config.json").yaml;
  EXPECT_EQ(at(g, "heads_q"), "96");
  EXPECT_EQ(at(g, "heads_kv"), "8");
  EXPECT_EQ(at(g, "head_dim"), "128");
  EXPECT_EQ(at(g, "moe.experts"), "128");
  EXPECT_EQ(at(g, "moe.expert_ffn_hidden"), "1408");
  EXPECT_EQ(at(g, "moe.shared_expert_ffn_hidden"), "1408");
  EXPECT_EQ(at(g, "moe.first_dense_layers"), "1");
  const std::string x = import_hf(kHf + "mixtral-8x7b/config.json").yaml;
  EXPECT_EQ(at(x, "moe.experts"), "8");
  EXPECT_EQ(at(x, "moe.top_k"), "2");
  EXPECT_EQ(at(x, "moe.expert_ffn_hidden"), "14336");  // each expert is a full-size MLP
  EXPECT_EQ(at(x, "attention"), "(absent)");             // sliding_window null
}

TEST(ImportHf, SlidingWindows) {
  // Mistral: one window on every layer.
  const std::string mistral = R"({"model_type": "mistral", "num_hidden_layers": 4, "hidden_size": 512,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000,
    "sliding_window": 4096})";
  const std::string a = import_hf_text(mistral, "m.json").yaml;
  EXPECT_EQ(at(a, "attention.mask"), "sliding-window");
  EXPECT_EQ(at(a, "attention.window"), "4096");
  EXPECT_EQ(at(a, "pattern"), "(absent)");
  // Qwen2: from max_window_layers on, only when use_sliding_window.
  const std::string qwen = R"({"model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 512,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000,
    "use_sliding_window": true, "sliding_window": 2048, "max_window_layers": 2})";
  const std::string b = import_hf_text(qwen, "q.json").yaml;
  EXPECT_EQ(at(b, "pattern"), "[full,full,sliding,sliding]");
  EXPECT_EQ(at(b, "attention.window"), "2048");
  EXPECT_EQ(at(b, "attention.mask"), "(absent)");  // the full layers keep the causal mask
  // layer_types wins, and its repetition is folded into the shortest pattern.
  const std::string typed = R"({"model_type": "qwen3", "num_hidden_layers": 6, "hidden_size": 512, "head_dim": 64,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000,
    "sliding_window": 1024, "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
    "full_attention", "sliding_attention", "full_attention"]})";
  EXPECT_EQ(at(import_hf_text(typed, "t.json").yaml, "pattern"), "[sliding,full]");
}

TEST(ImportHf, BadJsonPointsAtLineAndColumn) {
  const std::string e = error_of("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": 4096,,\n}\n");
  EXPECT_EQ(e.rfind("c.json:3:23: error: invalid JSON: syntax error", 0), 0u) << e;
  EXPECT_NE(e.find("\"hidden_size\": 4096,,"), std::string::npos) << e;  // the source line is quoted
  // A missing comma: the unexpected key is pointed at where it starts.
  EXPECT_EQ(error_of("{\n  \"a\": 1\n  \"b\": 2\n}").rfind("c.json:3:3: error: invalid JSON", 0), 0u);
  EXPECT_EQ(error_of("[1, 2]").rfind("c.json:1:1: error: expected a JSON object", 0), 0u);
}

TEST(ImportHf, MissingAndBadKeysNameTheFileAndKey) {
  const std::string base = R"({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512,
  "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000)";
  EXPECT_EQ(error_of(base + "}"),
            "c.json: error: num_key_value_heads: missing; a llama config needs it for heads_kv");
  const std::string e = error_of(base + ", \"num_key_value_heads\": \"2\"}");
  EXPECT_EQ(e.rfind("c.json:2:76: error: num_key_value_heads: expected an integer, got \"2\"", 0), 0u) << e;
  EXPECT_NE(error_of(base + ", \"num_key_value_heads\": 3}").find("3 does not divide num_attention_heads 8"),
            std::string::npos);
  // Qwen3's class default head_dim (128) is not hidden/heads: the importer asks for it.
  const std::string q = R"({"model_type": "qwen3", "num_hidden_layers": 4, "hidden_size": 512,
  "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000})";
  EXPECT_NE(error_of(q).find("head_dim: missing"), std::string::npos) << error_of(q);
  const std::string u = error_of(R"({"model_type": "gpt2"})");
  EXPECT_NE(u.find("c.json:1:2: error: model_type: 'gpt2' is not a model type cpsim imports (deepseek_v2, "),
            std::string::npos) << u;
  EXPECT_NE(error_of("{}").find("model_type: missing"), std::string::npos);
}

TEST(ImportHf, DenseLayersCpsimCannotPlaceAreRefused) {
  const std::string moe = R"({"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 512, "head_dim": 64,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024, "vocab_size": 1000,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256, "mlp_only_layers": )";
  EXPECT_EQ(at(import_hf_text(moe + "[0, 1]}", "m.json").yaml, "moe.first_dense_layers"), "2");
  const std::string e = error_of(moe + "[2]}");
  EXPECT_NE(e.find("mlp_only_layers: makes layers [2] dense"), std::string::npos) << e;
  const std::string types = R"({"model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 512,
    "head_dim": 64, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1024,
    "vocab_size": 1000, "layer_types": ["full_attention"]})";
  EXPECT_NE(error_of(types).find("layer_types: has 1 entries but num_hidden_layers is 4"), std::string::npos);
}

}  // namespace CPSIM_TEST_TU
