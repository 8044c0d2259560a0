// Hugging Face config.json -> model YAML text (import_hf.hpp). Key names and the defaults that
// apply when a key is absent follow the transformers configuration classes of each model_type
// (configuration_llama.py, configuration_qwen3_next.py, configuration_deepseek_v3.py, ...).
#include "scenario/import_hf.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "scenario/builders.hpp"
#include "scenario/json_object.hpp"
#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"
#include "support/bounded_read.hpp"

namespace cpsim::scenario {
namespace {

using detail::Json;
using detail::Origin;
using detail::Source;
using Cfg = detail::JsonObject;

enum class MoeKeys { None, Qwen, Mixtral, DeepSeek };
enum class Windows { None, Everywhere, Qwen };

/// What a model_type's config holds, from its transformers configuration class.
struct Family {
  const char* type;
  bool head_dim_required;  ///< the class default is not hidden/heads (Qwen3: 128), so never assume
  MoeKeys moe;
  bool mla;                ///< multi-head latent attention keys (DeepSeek)
  bool linear;             ///< Gated DeltaNet keys (Qwen3-Next schema)
  Windows windows;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"llama", false, MoeKeys::None, false, false, Windows::None},
      {"mistral", false, MoeKeys::None, false, false, Windows::Everywhere},
      {"qwen2", false, MoeKeys::None, false, false, Windows::Qwen},
      {"qwen3", true, MoeKeys::None, false, false, Windows::Qwen},
      {"qwen2_moe", false, MoeKeys::Qwen, false, false, Windows::Qwen},
      {"qwen3_moe", true, MoeKeys::Qwen, false, false, Windows::Qwen},
      {"qwen3_next", true, MoeKeys::Qwen, false, true, Windows::None},
      {"qwen3_5_text", true, MoeKeys::None, false, true, Windows::None},
      {"qwen3_5_moe_text", true, MoeKeys::Qwen, false, true, Windows::None},
      {"glm", true, MoeKeys::None, false, false, Windows::None},
      {"glm4", true, MoeKeys::None, false, false, Windows::None},
      {"glm4_moe", true, MoeKeys::DeepSeek, false, false, Windows::None},
      {"deepseek_v2", false, MoeKeys::DeepSeek, true, false, Windows::None},
      {"deepseek_v3", false, MoeKeys::DeepSeek, true, false, Windows::None},
      {"mixtral", false, MoeKeys::Mixtral, false, false, Windows::Everywhere},
  };
  return f;
}

/// Multimodal wrappers whose language model sits under `text_config` (Qwen3.5).
const std::vector<std::string>& wrapper_types() {
  static const std::vector<std::string> w = {"qwen3_5", "qwen3_5_moe"};
  return w;
}


/// The model's name: the last part of `_name_or_path` (the Hub id "Qwen/Qwen2.5-7B", or the
/// directory save_pretrained was given), else the model_type. Never the file's name: a Hub
/// snapshot's config.json sits in a directory named by a commit hash.
std::string model_name(Cfg& top, const Json& root, const std::string& type, std::vector<std::string>& notes) {
  top.use("_name_or_path");
  if (root.contains("_name_or_path") && !root.at("_name_or_path").is_null()) {
    if (!root.at("_name_or_path").is_string())
      top.bad("_name_or_path", "expected a string (the model's Hub id or path), got " + root.at("_name_or_path").dump());
    std::string id = root.at("_name_or_path").get<std::string>();
    while (!id.empty() && id.back() == '/') id.pop_back();
    const std::string last = id.substr(id.find_last_of('/') + 1);
    if (!last.empty()) return last;
  }
  notes.push_back("_name_or_path absent: the model is named after its model_type, " + type);
  return type;
}

enum class Kind { Full, Linear, Sliding };

const char* kind_name(Kind k) {
  return k == Kind::Full ? "full" : k == Kind::Linear ? "linear" : "sliding";
}

/// The shortest prefix whose repetition gives every layer (the model file's `pattern`).
std::vector<Kind> period(const std::vector<Kind>& kinds) {
  for (size_t p = 1; p <= kinds.size(); ++p) {
    bool ok = true;
    for (size_t i = p; i < kinds.size() && ok; ++i) ok = kinds[i] == kinds[i % p];
    if (ok) return {kinds.begin(), kinds.begin() + static_cast<std::ptrdiff_t>(p)};
  }
  return kinds;
}

struct Moe {
  int64_t experts = 0, top_k = 0, expert_ffn = 0, shared = 0, shared_ffn = 0, first_dense = 0;
};

/// Dense layers of the Qwen MoE classes: those in mlp_only_layers, and those whose index + 1 is
/// not a multiple of decoder_sparse_step. cpsim places dense layers first (moe.first_dense_layers).
int64_t qwen_first_dense(Cfg& c, int64_t layers, std::vector<std::string>& notes) {
  const auto step = c.opt_num("decoder_sparse_step", 1);
  const auto only = c.opt_int_list("mlp_only_layers", 0);
  if (!step) notes.push_back("decoder_sparse_step absent: 1 (the transformers default, every layer MoE)");
  std::set<int64_t> dense;
  for (int64_t i = 0; i < layers; ++i)
    if ((step && (i + 1) % *step != 0) || (only && std::count(only->begin(), only->end(), i) > 0))
      dense.insert(i);
  const auto k = static_cast<int64_t>(dense.size());
  if (!dense.empty() && *dense.rbegin() != k - 1) {
    std::string list;
    for (int64_t i : dense) list += (list.empty() ? "" : ", ") + std::to_string(i);
    c.bad(only && !only->empty() ? "mlp_only_layers" : "decoder_sparse_step",
          "makes layers [" + list + "] dense; cpsim places dense layers only first (moe.first_dense_layers)");
  }
  return k;
}

Moe read_moe(Cfg& c, const Family& f, int64_t layers, int64_t ffn, std::vector<std::string>& notes) {
  Moe m;
  const std::string fam = std::string("a ") + f.type + " config";
  switch (f.moe) {
    case MoeKeys::None: break;
    case MoeKeys::Qwen: {
      // Qwen3-Next and Qwen3.5-MoE are dense when num_experts is 0 (their decoder layer then
      // builds a plain MLP); Qwen2/3-MoE always have experts.
      const bool optional = f.linear;
      if (optional && (!c.has("num_experts") || c.opt_num("num_experts", 0).value_or(0) == 0)) {
        c.use("num_experts");
        return m;
      }
      m.experts = c.num("num_experts", 1, fam + " needs it for moe.experts");
      m.top_k = c.num("num_experts_per_tok", 1, fam + " needs it for moe.top_k");
      m.expert_ffn = c.num("moe_intermediate_size", 1, fam + " needs it for moe.expert_ffn_hidden");
      if (f.linear || std::string(f.type) == "qwen2_moe") {
        m.shared_ffn = c.num("shared_expert_intermediate_size", 0,
                             fam + " needs it for moe.shared_expert_ffn_hidden (0 for none)");
        m.shared = m.shared_ffn > 0 ? 1 : 0;
      }
      m.first_dense = qwen_first_dense(c, layers, notes);
      break;
    }
    case MoeKeys::Mixtral:
      m.experts = c.num("num_local_experts", 1, fam + " needs it for moe.experts");
      m.top_k = c.num("num_experts_per_tok", 1, fam + " needs it for moe.top_k");
      m.expert_ffn = ffn;  // Mixtral's experts are full-size SwiGLU MLPs of intermediate_size
      break;
    case MoeKeys::DeepSeek: {
      m.experts = c.num("n_routed_experts", 1, fam + " needs it for moe.experts");
      m.top_k = c.num("num_experts_per_tok", 1, fam + " needs it for moe.top_k");
      m.expert_ffn = c.num("moe_intermediate_size", 1, fam + " needs it for moe.expert_ffn_hidden");
      // transformers builds one shared MLP of moe_intermediate_size * n_shared_experts; cpsim
      // counts n_shared_experts experts of moe_intermediate_size each (the same FLOPs and bytes).
      m.shared = c.num("n_shared_experts", 0, fam + " needs it for moe.shared_experts (0 for none)");
      m.shared_ffn = m.shared > 0 ? m.expert_ffn : 0;
      m.first_dense = c.num("first_k_dense_replace", 0, fam + " needs it for moe.first_dense_layers");
      if (const auto freq = c.opt_num("moe_layer_freq", 1); freq && *freq != 1)
        c.bad("moe_layer_freq", "MoE on every " + std::to_string(*freq) +
                                    "th layer cannot be expressed; cpsim places dense layers only first");
      break;
    }
  }
  if (m.top_k > m.experts)
    c.bad(f.moe == MoeKeys::Mixtral ? "num_local_experts" : "num_experts_per_tok",
          "top-k " + std::to_string(m.top_k) + " exceeds the " + std::to_string(m.experts) + " experts");
  if (m.first_dense > layers)
    c.bad("first_k_dense_replace", "exceeds num_hidden_layers " + std::to_string(layers));
  return m;
}

/// The layer kinds, one per layer, and the sliding window when any layer slides.
std::vector<Kind> read_kinds(Cfg& c, const Family& f, int64_t layers, int64_t& window,
                             std::vector<std::string>& notes) {
  std::vector<Kind> kinds(static_cast<size_t>(layers), Kind::Full);
  const std::string fam = std::string("a ") + f.type + " config";
  if (auto types = c.opt_str_list("layer_types")) {
    if (static_cast<int64_t>(types->size()) != layers)
      c.bad("layer_types", "has " + std::to_string(types->size()) + " entries but num_hidden_layers is " +
                               std::to_string(layers));
    for (size_t i = 0; i < types->size(); ++i) {
      const std::string& t = (*types)[i];
      if (t == "full_attention") kinds[i] = Kind::Full;
      else if (t == "linear_attention" && f.linear) kinds[i] = Kind::Linear;
      else if (t == "sliding_attention") kinds[i] = Kind::Sliding;
      else
        c.bad("layer_types", "entry " + std::to_string(i) + " '" + t + "' is not one of full_attention, " +
                                 (f.linear ? "linear_attention, " : "") + "sliding_attention");
    }
    c.use("full_attention_interval");  // layer_types wins over it in transformers
    c.use("use_sliding_window");
    c.use("max_window_layers");
  } else if (f.linear) {
    // transformers: layer i is linear unless (i + 1) is a multiple of full_attention_interval.
    const int64_t every = c.num("full_attention_interval", 1, fam + " without layer_types needs it for pattern");
    for (int64_t i = 0; i < layers; ++i)
      kinds[static_cast<size_t>(i)] = (i + 1) % every == 0 ? Kind::Full : Kind::Linear;
  } else if (f.windows == Windows::Qwen) {
    // Qwen2Config: sliding_window only counts when use_sliding_window, and then only from layer
    // max_window_layers on.
    const bool on = c.opt_bool("use_sliding_window").value_or(false);
    c.use("sliding_window");
    c.use("max_window_layers");
    if (on) {
      const int64_t from = c.num("max_window_layers", 0, "use_sliding_window is true");
      for (int64_t i = from; i < layers; ++i) kinds[static_cast<size_t>(i)] = Kind::Sliding;
    }
  } else if (f.windows == Windows::Everywhere && c.has("sliding_window")) {
    std::fill(kinds.begin(), kinds.end(), Kind::Sliding);
  }
  if (std::count(kinds.begin(), kinds.end(), Kind::Sliding) > 0)
    window = c.num("sliding_window", 1, "the config has sliding-window layers");
  else
    c.use("sliding_window");
  (void)notes;
  return kinds;
}

/// Bias terms, which cpsim's model does not have (its projections are bias-free, as in Llama):
/// said, with what they weigh, rather than silently dropped. Qwen2 and Qwen2-MoE put biases on
/// the Q, K and V projections with no config key (transformers modeling_qwen2.py:
/// `nn.Linear(hidden_size, num_heads * head_dim, bias=True)` for q_proj, k_proj, v_proj);
/// other families say so with `attention_bias` (Q, K, V and O) and `mlp_bias` (gate, up, down).
void note_biases(Cfg& c, const Family& f, int64_t layers, int64_t hidden, int64_t heads, int64_t kv, int64_t head_dim,
                 int64_t ffn, std::vector<std::string>& notes) {
  const int64_t qkv = (heads + 2 * kv) * head_dim;
  const auto say = [&](const std::string& what, int64_t per_layer) {
    notes.push_back(what + ": cpsim's model has no bias terms, so " + std::to_string(layers * per_layer) +
                    " parameters (" + std::to_string(per_layer) +
                    " per layer; their FLOPs and bytes are as small) are not counted");
  };
  const std::string type = f.type;
  if (type == "qwen2" || type == "qwen2_moe") say(type + " has biases on the Q, K and V projections (no config key)", qkv);
  if (c.opt_bool("attention_bias").value_or(false))
    say("attention_bias true: the Q, K, V and output projections have biases", qkv + hidden);
  if (c.opt_bool("mlp_bias").value_or(false)) say("mlp_bias true: the MLP projections have biases", 2 * ffn + hidden);
}

HfImport map_config(const Json& root, const std::shared_ptr<const Source>& src, const std::string& text,
                    const std::string& file) {
  HfImport out;
  Cfg top(root, src, text, 0, "");
  const Json* body = &root;
  size_t from = 0;
  std::string prefix;
  const auto type_of = [&](Cfg& c, const Json& j) -> std::string {
    c.use("model_type");
    if (!j.contains("model_type"))
      c.missing("model_type", "it names the model family (one of " + detail::join(hf_model_types()) + ")");
    if (!j.at("model_type").is_string()) c.bad("model_type", "expected a string, got " + j.at("model_type").dump());
    return j.at("model_type").get<std::string>();
  };
  std::string type = type_of(top, root);
  const std::string outer_type = type;  // a wrapper's own (qwen3_5), not its text model's
  std::optional<Cfg> inner;
  if (std::count(wrapper_types().begin(), wrapper_types().end(), type) > 0) {
    top.use("text_config");
    if (!root.contains("text_config") || !root.at("text_config").is_object())
      top.missing("text_config", "a " + type + " config holds its language model there");
    body = &root.at("text_config");
    from = text.find("\"text_config\"");
    prefix = "text_config.";
    inner.emplace(*body, src, text, from == std::string::npos ? 0 : from, prefix);
    type = type_of(*inner, *body);
  }
  Cfg& c = inner ? *inner : top;
  const auto fam = std::find_if(families().begin(), families().end(),
                                [&](const Family& f) { return type == f.type; });
  if (fam == families().end())
    c.bad("model_type", "'" + type + "' is not a model type cpsim imports (" + detail::join(hf_model_types()) + ")");
  const Family& f = *fam;
  out.model_type = type;
  const std::string need = std::string("a ") + f.type + " config needs it for ";

  const int64_t layers = c.num("num_hidden_layers", 1, need + "layers");
  const int64_t hidden = c.num("hidden_size", 1, need + "hidden");
  const int64_t heads = c.num("num_attention_heads", 1, need + "heads_q");
  const int64_t kv = c.num("num_key_value_heads", 1, need + "heads_kv");
  if (kv > heads || heads % kv != 0)
    c.bad("num_key_value_heads", std::to_string(kv) + " does not divide num_attention_heads " + std::to_string(heads));
  std::optional<int64_t> head_dim;
  if (f.mla) {
    c.use("head_dim");  // MLA widths come from qk_nope_head_dim + qk_rope_head_dim
  } else if (f.head_dim_required) {
    head_dim = c.num("head_dim", 1, need + "head_dim (its transformers class does not derive it from hidden_size)");
  } else {
    head_dim = c.opt_num("head_dim", 1);
    if (!head_dim) {
      if (hidden % heads != 0)
        c.missing("head_dim", "hidden_size is not divisible by num_attention_heads");
      out.notes.push_back("head_dim absent: hidden_size / num_attention_heads = " + std::to_string(hidden / heads) +
                          ", as transformers derives it");
    }
  }
  const int64_t ffn = c.num("intermediate_size", 1, need + "ffn_hidden");
  const int64_t vocab = c.num("vocab_size", 1, need + "vocab");
  std::optional<bool> tied = c.opt_bool("tie_word_embeddings");
  if (inner) {  // a wrapper repeats it at the top level
    const auto outer = top.opt_bool("tie_word_embeddings");
    if (!tied) tied = outer;
  }
  if (!tied) out.notes.push_back("tie_word_embeddings absent: false (the default of every class imported here)");

  int64_t window = 0;
  const std::vector<Kind> kinds = read_kinds(c, f, layers, window, out.notes);
  const bool any_linear = std::count(kinds.begin(), kinds.end(), Kind::Linear) > 0;
  const auto n_sliding = std::count(kinds.begin(), kinds.end(), Kind::Sliding);

  std::ostringstream lin;
  if (f.linear) {
    const std::string why = "the config has linear-attention layers (linear_attention.";
    if (any_linear) {
      lin << "linear_attention:\n"
          << "  heads_v: " << c.num("linear_num_value_heads", 1, why + "heads_v)") << "  # linear_num_value_heads\n"
          << "  heads_k: " << c.num("linear_num_key_heads", 1, why + "heads_k)") << "  # linear_num_key_heads\n"
          << "  key_dim: " << c.num("linear_key_head_dim", 1, why + "key_dim)") << "  # linear_key_head_dim\n"
          << "  value_dim: " << c.num("linear_value_head_dim", 1, why + "value_dim)") << "  # linear_value_head_dim\n"
          << "  conv_width: " << c.num("linear_conv_kernel_dim", 1, why + "conv_width)")
          << "  # linear_conv_kernel_dim\n";
    }
  }

  std::ostringstream mla;
  int64_t qk_width = 0;
  if (f.mla) {
    const std::string why = "a multi-head latent attention config needs it for mla.";
    const auto q_rank = c.opt_num("q_lora_rank", 1);
    if (!q_rank) out.notes.push_back("q_lora_rank null: queries are projected without a low-rank step (mla.q_lora_rank 0)");
    const int64_t kv_rank = c.num("kv_lora_rank", 1, why + "kv_lora_rank");
    const int64_t nope = c.num("qk_nope_head_dim", 0, why + "qk_nope_head_dim");
    const int64_t rope = c.num("qk_rope_head_dim", 0, why + "qk_rope_head_dim");
    const int64_t v = c.num("v_head_dim", 1, why + "v_head_dim");
    qk_width = nope + rope;
    if (qk_width < 1) c.bad("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be at least 1");
    mla << "attention_type: mla\n"
        << "mla:\n"
        << "  q_lora_rank: " << q_rank.value_or(0) << "\n"
        << "  kv_lora_rank: " << kv_rank << "\n"
        << "  qk_nope_head_dim: " << nope << "\n"
        << "  qk_rope_head_dim: " << rope << "\n"
        << "  v_head_dim: " << v << "\n";
  }

  const Moe moe = read_moe(c, f, layers, ffn, out.notes);
  note_biases(c, f, layers, hidden, heads, kv, head_dim ? *head_dim : f.mla ? qk_width : hidden / heads, ffn, out.notes);
  const std::string name = model_name(top, root, outer_type, out.notes);

  out.ignored = top.unused();
  if (inner)
    for (auto& k : inner->unused()) out.ignored.push_back(k);

  std::ostringstream o;
  o << "# Imported by `cpsim import hf` from " << detail::comment_text(file) << " (model_type "
    << detail::comment_text(type) << ").\n";
  if (!out.ignored.empty()) o << detail::comment_lines("ignored", out.ignored);
  for (const auto& n : out.notes) o << "# note: " << detail::comment_text(n) << "\n";
  o << "name: " << detail::yaml_scalar(name) << "  # " << (root.contains("_name_or_path") ? "_name_or_path" : "model_type") << "\n"
    << "layers: " << layers << "  # num_hidden_layers\n"
    << "hidden: " << hidden << "  # hidden_size\n"
    << "heads_q: " << heads << "  # num_attention_heads\n"
    << "heads_kv: " << kv << "  # num_key_value_heads\n";
  if (head_dim) o << "head_dim: " << *head_dim << "  # head_dim\n";
  if (f.mla) o << "head_dim: " << qk_width << "  # qk_nope_head_dim + qk_rope_head_dim (the query-key width)\n";
  o << "ffn_hidden: " << ffn << "  # intermediate_size" << (moe.experts > 0 && f.moe != MoeKeys::Mixtral ? " (dense layers)" : "")
    << "\n"
    << "vocab: " << vocab << "  # vocab_size\n"
    << "tied_embeddings: " << (tied.value_or(false) ? "true" : "false") << "  # tie_word_embeddings\n";
  const bool all_sliding = n_sliding == static_cast<std::ptrdiff_t>(kinds.size());
  if (all_sliding) {
    o << "attention:\n  mask: sliding-window\n  window: " << window << "  # sliding_window\n";
  } else if (n_sliding > 0 || any_linear) {
    const std::vector<Kind> p = period(kinds);
    o << "pattern: [";
    for (size_t i = 0; i < p.size(); ++i) o << (i ? ", " : "") << kind_name(p[i]);
    o << "]  # " << (c.has("layer_types") ? "layer_types" : f.linear ? "full_attention_interval"
                                                                         : "use_sliding_window, max_window_layers")
      << "\n";
    if (n_sliding > 0) o << "attention:\n  window: " << window << "  # sliding_window (the `sliding` layers)\n";
  }
  o << lin.str() << mla.str();
  if (moe.experts > 0) {
    o << "moe:\n"
      << "  experts: " << moe.experts << "\n"
      << "  top_k: " << moe.top_k << "  # num_experts_per_tok\n"
      << "  expert_ffn_hidden: " << moe.expert_ffn << "\n"
      << "  shared_experts: " << moe.shared << "\n"
      << "  shared_expert_ffn_hidden: " << moe.shared_ffn << "\n"
      << "  first_dense_layers: " << moe.first_dense << "\n";
  }
  out.yaml = o.str();
  return out;
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> t = [] {
    std::vector<std::string> v;
    for (const auto& f : families()) v.push_back(f.type);
    for (const auto& w : wrapper_types()) v.push_back(w);
    std::sort(v.begin(), v.end());
    return v;
  }();
  return t;
}

HfImport import_hf_text(const std::string& text, const std::string& file) {
  const detail::JsonText json = detail::parse_json(text, file);
  if (!json.root.is_object())
    detail::fail(Origin{json.src, 1, 1}, "", "expected a JSON object (a Hugging Face config.json), got " +
                                                 std::string(json.root.type_name()));
  return map_config(json.root, json.src, json.text, file);
}

HfImport import_hf(const std::string& path) {
  // parse_file's reading rules (size limit, directories, missing files) without its YAML parse.
  namespace fs = std::filesystem;
  auto src = std::make_shared<Source>();
  src->file = path;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    detail::fail(Origin{src, 0, 0}, "", "cannot read Hugging Face config: it is a directory (give its config.json)");
  std::string why;
  const std::optional<std::string> text = support::read_regular_file(path, support::kMaxInputBytes, why);
  if (!text) detail::fail(Origin{src, 0, 0}, "", "cannot read Hugging Face config: " + why);
  return import_hf_text(*text, path);
}

namespace detail {

std::string yaml_scalar(const std::string& s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
  if (plain && !std::isdigit(static_cast<unsigned char>(s[0]))) return s;
  YAML::Emitter e;
  e << YAML::DoubleQuoted << s;
  return e.c_str();
}

std::string comment_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else out += c;
  }
  return out;
}

std::string comment_lines(const std::string& head, const std::vector<std::string>& items) {
  std::string out, line = "# " + comment_text(head) + ":";
  for (size_t i = 0; i < items.size(); ++i) {
    std::string item = " ";  // appended: GCC 12 -O3's false -Wrestrict on "..." + std::string&& (bug 105651)
    item += comment_text(items[i]);
    if (i + 1 < items.size()) item += ",";
    if (line.size() + item.size() > 100) {
      out += line + "\n";
      line = "#  ";
    }
    line += item;
  }
  return out + line + "\n";
}

Node hf_model_tree(const Node& ref, std::string* file_out) {
  const std::string rel = ref.scalar.substr(3);
  if (rel.empty()) fail_at(ref, "expected hf:PATH to a Hugging Face config.json after 'hf:'");
  const std::string base = ref.at.src ? ref.at.src->dir : std::string();
  const std::string path = join_path(base, rel);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail_at(ref, "cannot read Hugging Face config '" + path + "': " +
                     (std::filesystem::is_directory(path, ec) ? "it is a directory (give its config.json)"
                                                              : "no such file"));
  const HfImport imp = import_hf(path);
  if (file_out != nullptr && file_out->empty()) *file_out = path;
  // The document's messages name it "hf:<path>" (there is no YAML file on disk to point at).
  return parse_text(imp.yaml, "hf:" + path, dir_of(path));
}

}  // namespace detail
}  // namespace cpsim::scenario
