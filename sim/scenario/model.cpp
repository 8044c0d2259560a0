// Model files -> ModelSpec.
#include <algorithm>

#include "scenario/builders.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"
#include "scenario/moe_keys.hpp"

namespace cpsim::scenario {
namespace detail {

ModelSpec build_model(const Node& tree, const std::string& default_name) {
  MapReader r(tree, {"name", "description", "layers", "hidden", "heads_q", "heads_kv", "head_dim",
                     "ffn_hidden", "vocab", "tied_embeddings", "pattern", "linear_attention",
                     "total_params", "attention", "attention_type", "mla", "moe"});
  if (tree.is_null()) fail_at(tree, "expected a model mapping, got nothing");
  ModelSpec m;
  m.name = r.get("name") ? as_string(*r.get("name")) : default_name;
  if (r.get("description")) as_string(*r.get("description"));
  m.layers = static_cast<int>(as_int(r.require("layers"), 1, 100'000));
  m.hidden = static_cast<int>(as_int(r.require("hidden"), 1, 10'000'000));
  const Node& hq = r.require("heads_q");
  m.heads_q = static_cast<int>(as_int(hq, 1, 1'000'000));
  m.heads_kv = m.heads_q;
  if (const Node* kv = r.get("heads_kv")) {
    m.heads_kv = static_cast<int>(as_int(*kv, 1, m.heads_q));
    if (m.heads_q % m.heads_kv != 0)
      fail_at(*kv, "heads_q " + std::to_string(m.heads_q) + " is not a multiple of heads_kv " +
                       std::to_string(m.heads_kv) + " (each KV head serves a whole group of query heads)");
  }
  if (const Node* hd = r.get("head_dim")) {
    m.head_dim = static_cast<int>(as_int(*hd, 1, 65'536));
  } else {
    if (m.hidden % m.heads_q != 0)
      fail_at(hq, "head_dim is not given and hidden " + std::to_string(m.hidden) +
                      " is not divisible by heads_q " + std::to_string(m.heads_q) + "; give head_dim");
    m.head_dim = m.hidden / m.heads_q;
  }
  m.ffn_hidden = static_cast<int>(as_int(r.require("ffn_hidden"), 1, 100'000'000));
  m.vocab = static_cast<int>(as_int(r.require("vocab"), 1, 1'000'000'000));
  if (const Node* t = r.get("tied_embeddings")) m.tied_embeddings = as_bool(*t);

  const Node* pattern = r.get("pattern");
  if (pattern) {
    m.pattern.clear();
    // `sliding` is a softmax layer with the causal window attention.window.
    auto kind = [&m](const Node& n) {
      const size_t k = as_choice(n, {"full", "linear", "sliding"});
      m.pattern_sliding.push_back(k == 2 ? 1 : 0);
      return k == 1 ? LayerKind::LinearAttention : LayerKind::FullAttention;
    };
    m.pattern_sliding.clear();
    if (pattern->is_seq()) {
      if (pattern->children.empty()) fail_at(*pattern, "expected at least one layer kind (full, linear or sliding)");
      for (const auto& c : pattern->children) m.pattern.push_back(kind(c));
    } else {
      m.pattern.push_back(kind(*pattern));
    }
    if (std::find(m.pattern_sliding.begin(), m.pattern_sliding.end(), 1) == m.pattern_sliding.end())
      m.pattern_sliding.clear();
    if (static_cast<int>(m.pattern.size()) > m.layers)
      fail_at(*pattern, "pattern has " + std::to_string(m.pattern.size()) + " entries but the model has " +
                            std::to_string(m.layers) + " layers");
  }
  const bool has_linear =
      std::find(m.pattern.begin(), m.pattern.end(), LayerKind::LinearAttention) != m.pattern.end();

  const Node* lin = r.get("linear_attention");
  if (lin) {
    MapReader lr(*lin, {"heads_v", "heads_k", "key_dim", "value_dim", "conv_width"});
    if (has_linear || lr.get("heads_v")) m.linear_heads_v = static_cast<int>(as_int(lr.require("heads_v"), 1, 1'000'000));
    if (has_linear || lr.get("heads_k")) m.linear_heads_k = static_cast<int>(as_int(lr.require("heads_k"), 1, 1'000'000));
    if (const Node* v = lr.get("key_dim")) m.linear_key_dim = static_cast<int>(as_int(*v, 1, 65'536));
    if (const Node* v = lr.get("value_dim")) m.linear_value_dim = static_cast<int>(as_int(*v, 1, 65'536));
    if (const Node* v = lr.get("conv_width")) m.linear_conv_width = static_cast<int>(as_int(*v, 1, 1024));
  } else if (has_linear) {
    fail_key(*pattern, "the pattern has linear layers but 'linear_attention' {heads_v, heads_k, key_dim, "
                       "value_dim, conv_width} is missing");
  }
  const Node* att = r.get("attention");
  if (att) {
    MapReader ar(*att, {"mask", "window"});
    if (const Node* v = ar.get("mask"))
      m.attention_mask = static_cast<AttentionMask>(as_choice(*v, choices(kModelMaskNames)));
    if (const Node* v = ar.get("window")) {
      m.window = as_tokens(*v);
      check_min(*v, static_cast<double>(m.window), 1, true);
    }
  }
  const bool wants_window = m.attention_mask == AttentionMask::SlidingWindow || !m.pattern_sliding.empty();
  if (wants_window && m.window == 0)
    fail_key(att ? *att : *pattern, std::string(att ? "attention" : "pattern") +
                                        ": a sliding-window mask (mask: sliding-window or a 'sliding' pattern "
                                        "entry) needs attention.window, the window in tokens such as 4K");
  if (const Node* tp = r.get("total_params")) {
    m.total_params = as_number(*tp);
    check_min(*tp, m.total_params, 0, true);
    check_max(*tp, m.total_params, 1e16, true);
  }
  read_moe_model(r, m);
  return m;
}

}  // namespace detail

ModelSpec load_model(const std::string& name_or_path) {
  using namespace detail;
  const Node ref = name_node(name_or_path, "<model>");
  std::string file;
  const Node tree = resolve_ref(ref, model_ref(), &file);
  return build_model(tree, file_stem(file));
}

}  // namespace cpsim::scenario
