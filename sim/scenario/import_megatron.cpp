// Megatron-LM / NeMo arguments -> scenario YAML text (import_megatron.hpp). Argument names,
// defaults and constraints follow megatron/training/arguments.py and
// megatron/core/parallel_state.py of Megatron-LM (core_r0.12 and later).
#include "scenario/import_megatron.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "scenario/builders.hpp"
#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario {
namespace {

using detail::Origin;
using detail::Source;

enum class Arity { Flag, One, Many };

/// The arguments cpsim reads; every other one is reported as not understood.
const std::map<std::string, Arity>& known() {
  static const std::map<std::string, Arity> k = {
      // parallelism
      {"tensor-model-parallel-size", Arity::One}, {"pipeline-model-parallel-size", Arity::One},
      {"context-parallel-size", Arity::One}, {"cp-comm-type", Arity::Many},
      {"hierarchical-context-parallel-sizes", Arity::Many}, {"sequence-parallel", Arity::Flag},
      {"expert-model-parallel-size", Arity::One}, {"expert-tensor-parallel-size", Arity::One},
      {"num-layers-per-virtual-pipeline-stage", Arity::One},
      {"num-virtual-stages-per-pipeline-rank", Arity::One}, {"use-distributed-optimizer", Arity::Flag},
      {"overlap-grad-reduce", Arity::Flag}, {"overlap-param-gather", Arity::Flag},
      {"align-param-gather", Arity::Flag}, {"grad-reduce-in-bf16", Arity::Flag},
      {"ddp-bucket-size", Arity::One},
      {"tp-comm-overlap", Arity::Flag},
      // training
      {"seq-length", Arity::One}, {"micro-batch-size", Arity::One}, {"global-batch-size", Arity::One},
      {"recompute-granularity", Arity::One}, {"recompute-method", Arity::One},
      {"recompute-num-layers", Arity::One}, {"optimizer-cpu-offload", Arity::Flag},
      {"optimizer-offload-fraction", Arity::One}, {"fp8-format", Arity::One}, {"fp8", Arity::Flag}, {"fp8-recipe", Arity::One},
      {"bf16", Arity::Flag}, {"fp16", Arity::Flag}, {"attention-backend", Arity::One},
      // model
      {"num-layers", Arity::One}, {"hidden-size", Arity::One}, {"num-attention-heads", Arity::One},
      {"group-query-attention", Arity::Flag}, {"num-query-groups", Arity::One},
      {"ffn-hidden-size", Arity::One}, {"kv-channels", Arity::One}, {"vocab-size", Arity::One},
      {"swiglu", Arity::Flag}, {"untie-embeddings-and-output-weights", Arity::Flag},
      {"num-experts", Arity::One}, {"moe-router-topk", Arity::One}, {"moe-ffn-hidden-size", Arity::One},
      {"moe-shared-expert-intermediate-size", Arity::One}, {"moe-layer-freq", Arity::One},
      {"moe-expert-capacity-factor", Arity::One}, {"multi-latent-attention", Arity::Flag},
      {"q-lora-rank", Arity::One}, {"kv-lora-rank", Arity::One}, {"qk-head-dim", Arity::One},
      {"qk-pos-emb-head-dim", Arity::One}, {"v-head-dim", Arity::One},
      // world size (torchrun) and cpsim's own
      {"nnodes", Arity::One}, {"nproc-per-node", Arity::One}, {"platform", Arity::One},
      {"nodes", Arity::One}, {"model", Arity::One}, {"name", Arity::One},
  };
  return k;
}

/// NeMo 1 config keys whose Megatron argument has another name.
const std::map<std::string, std::string>& nemo_renames() {
  static const std::map<std::string, std::string> r = {
      {"trainer.num-nodes", "nnodes"},
      {"trainer.devices", "nproc-per-node"},
      {"model.encoder-seq-length", "seq-length"},
      {"model.virtual-pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank"},
      {"model.activations-checkpoint-granularity", "recompute-granularity"},
      {"model.activations-checkpoint-method", "recompute-method"},
      {"model.activations-checkpoint-num-layers", "recompute-num-layers"},
      {"model.num-moe-experts", "num-experts"},
  };
  return r;
}

struct Tok {
  std::string text;
  int col = 0;  ///< 1-based column in the joined command line
};

struct Arg {
  Tok at;                   ///< the option itself
  std::vector<Tok> values;
};

class Args {
 public:
  explicit Args(const std::vector<std::string>& raw) : src_(std::make_shared<Source>()) {
    std::string line;
    std::vector<Tok> toks;
    for (const auto& r : raw) {
      if (!line.empty()) line += ' ';
      toks.push_back({r, static_cast<int>(line.size()) + 1});
      line += r;
    }
    src_->file = "<megatron arguments>";
    src_->lines = {line};
    for (size_t i = 0; i < toks.size();) {
      const Tok& t = toks[i];
      if (t.text.rfind("--", 0) != 0) {
        if (!nemo(t)) not_understood.push_back(t.text);
        ++i;
        continue;
      }
      std::string name = t.text.substr(2);
      std::optional<Tok> inline_value;
      if (const size_t eq = name.find('='); eq != std::string::npos) {
        inline_value = Tok{name.substr(eq + 1), t.col + 3 + static_cast<int>(eq)};
        name = name.substr(0, eq);
      }
      std::replace(name.begin(), name.end(), '_', '-');
      size_t j = i + 1;
      std::vector<Tok> values;
      if (inline_value) values.push_back(*inline_value);
      while (j < toks.size() && toks[j].text.rfind("--", 0) != 0) values.push_back(toks[j++]);
      const auto k = known().find(name);
      if (k == known().end()) {
        std::string all = t.text;
        for (const auto& v : values) all += " " + v.text;
        not_understood.push_back(all);
      } else {
        const size_t take = k->second == Arity::Flag ? 0 : k->second == Arity::One ? 1 : values.size();
        if (take > 0 && values.empty()) fail(t, name, "expects a value");
        args_[name] = Arg{t, {values.begin(), values.begin() + static_cast<std::ptrdiff_t>(take)}};
        for (size_t s = take; s < values.size(); ++s) not_understood.push_back(values[s].text);
      }
      i = j;
    }
  }

  [[noreturn]] void fail(const Tok& t, const std::string& name, const std::string& msg) const {
    detail::fail(Origin{src_, 1, t.col}, "--" + name, msg);
  }
  const Arg* get(const std::string& name) const {
    const auto it = args_.find(name);
    return it == args_.end() ? nullptr : &it->second;
  }
  bool flag(const std::string& name) const { return get(name) != nullptr; }
  std::optional<std::string> str(const std::string& name) const {
    const Arg* a = get(name);
    return a ? std::optional<std::string>(a->values[0].text) : std::nullopt;
  }
  std::optional<int64_t> integer(const std::string& name, int64_t min) const {
    const Arg* a = get(name);
    if (!a) return std::nullopt;
    const Tok& v = a->values[0];
    size_t used = 0;
    int64_t n = 0;
    try {
      n = std::stoll(v.text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.text.size() || v.text.empty())
      fail(v, name, "expected an integer >= " + std::to_string(min) + ", got '" + v.text.substr(0, 40) + "'");
    if (n < min || n > 1'000'000'000)
      fail(v, name, "must be from " + std::to_string(min) + " to 1000000000, got " + v.text.substr(0, 40));
    return n;
  }
  std::optional<double> number(const std::string& name) const {
    const Arg* a = get(name);
    if (!a) return std::nullopt;
    const Tok& v = a->values[0];
    size_t used = 0;
    double d = 0;
    try {
      d = std::stod(v.text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.text.size() || v.text.empty() || !std::isfinite(d) || d < 0)
      fail(v, name, "expected a number >= 0, got '" + v.text + "'");
    return d;
  }
  int64_t need(const std::string& name, int64_t min, const std::string& why) const {
    if (auto v = integer(name, min)) return *v;
    detail::fail(Origin{src_, 0, 0}, "--" + name, "missing; " + why);
  }

  std::vector<std::string> not_understood;

 private:
  /// NeMo 1 overrides: trainer.num_nodes=4, model.tensor_model_parallel_size=2,
  /// model.sequence_parallel=True, model.hierarchical_context_parallel_sizes=[2,2].
  bool nemo(const Tok& t) {
    const size_t eq = t.text.find('=');
    if (eq == std::string::npos || !(t.text.starts_with("model.") || t.text.starts_with("trainer."))) return false;
    std::string key = t.text.substr(0, eq);
    std::replace(key.begin(), key.end(), '_', '-');
    std::string name = key.substr(key.find('.') + 1);
    if (const auto r = nemo_renames().find(key); r != nemo_renames().end()) name = r->second;
    else if (key.starts_with("trainer.") || key.find('.', 6) != std::string::npos) return false;
    const auto k = known().find(name);
    if (k == known().end()) return false;
    std::string value = t.text.substr(eq + 1);
    const int vcol = t.col + static_cast<int>(eq) + 1;
    if (k->second == Arity::Flag) {
      std::string low = value;
      std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
      if (low != "true" && low != "false") fail(Tok{value, vcol}, name, "expected True or False, got '" + value + "'");
      if (low == "true") args_[name] = Arg{t, {}};
      else args_.erase(name);
      return true;
    }
    std::vector<Tok> values;
    if (k->second == Arity::Many && value.size() >= 2 && value.front() == '[' && value.back() == ']') {
      std::string cur;
      for (char c : value.substr(1, value.size() - 2) + ",") {
        if (c == ',') {
          if (!cur.empty()) values.push_back(Tok{cur, vcol});
          cur.clear();
        } else if (c != ' ') {
          cur.push_back(c);
        }
      }
    } else {
      values.push_back(Tok{value, vcol});
    }
    if (values.empty()) fail(t, name, "expects a value");
    args_[name] = Arg{t, values};
    return true;
  }

  std::shared_ptr<Source> src_;
  std::map<std::string, Arg> args_;
};

/// --moe-layer-freq: 1 (every layer) or a Python list expression such as ([0]*3+[1]*58) or
/// [0,0,1,1]; cpsim places dense layers only first, so the list must be zeros then ones.
int64_t first_dense_layers(const Args& a, int64_t layers) {
  const Arg* arg = a.get("moe-layer-freq");
  if (!arg) return 0;
  const Tok& v = arg->values[0];
  std::string s;
  for (char c : v.text)
    if (c != ' ' && c != '(' && c != ')' && c != '\'' && c != '"') s.push_back(c);
  if (s == "1") return 0;
  std::vector<int> pattern;
  std::stringstream parts(s);
  for (std::string part; std::getline(parts, part, '+');) {
    const size_t close = part.find(']');
    if (part.empty() || part[0] != '[' || close == std::string::npos)
      a.fail(v, "moe-layer-freq", "expected 1 or a list such as ([0]*3+[1]*58), got '" + v.text + "'");
    std::vector<int> items;
    std::stringstream in(part.substr(1, close - 1));
    for (std::string item; std::getline(in, item, ',');) {
      if (item != "0" && item != "1")
        a.fail(v, "moe-layer-freq", "list entries must be 0 (dense) or 1 (MoE), got '" + item + "'");
      items.push_back(item == "1");
    }
    int64_t times = 1;
    const std::string rest = part.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != '*' || rest.size() < 2 || rest.find_first_not_of("0123456789", 1) != std::string::npos)
        a.fail(v, "moe-layer-freq", "expected [..]*N, got '" + part + "'");
      times = std::stoll(rest.substr(1));
    }
    for (int64_t t = 0; t < times && static_cast<int64_t>(pattern.size()) <= layers; ++t)
      pattern.insert(pattern.end(), items.begin(), items.end());
  }
  if (static_cast<int64_t>(pattern.size()) != layers)
    a.fail(v, "moe-layer-freq", "lists " + std::to_string(pattern.size()) + " layers but the model has " +
                                    std::to_string(layers));
  const auto k = std::find(pattern.begin(), pattern.end(), 1) - pattern.begin();
  if (std::find(pattern.begin() + k, pattern.end(), 0) != pattern.end())
    a.fail(v, "moe-layer-freq", "has a dense layer after a MoE layer; cpsim places dense layers only first");
  return k;
}

struct ModelOut {
  std::string yaml;  ///< the `model:` entry
  int64_t layers = 0;
};

/// `--model NAME|hf:config.json`, else the model the shape arguments describe.
ModelOut model_entry(const Args& a, const std::string& out_dir, std::vector<std::string>& notes) {
  namespace fs = std::filesystem;
  ModelOut m;
  if (const auto name = a.str("model")) {
    // Resolved the same way the scenario will resolve it, for the layer count.
    std::string file;
    const detail::Node tree =
        detail::resolve_ref(detail::name_node(*name, "<--model>"), detail::model_ref(), &file);
    const detail::Node* layers = tree.find("layers");
    if (!layers) a.fail(a.get("model")->values[0], "model", "model '" + *name + "' has no layers");
    m.layers = detail::as_int(*layers, 1, 100'000);
    std::string ref = *name;
    if (ref.starts_with("hf:")) {
      const fs::path target = fs::absolute(ref.substr(3));
      ref = "hf:" + fs::relative(target, fs::absolute(out_dir.empty() ? "." : out_dir)).generic_string();
    }
    m.yaml = "model: " + detail::yaml_scalar(ref) + "\n";
    for (const char* k : {"num-layers", "hidden-size", "num-attention-heads", "num-query-groups", "ffn-hidden-size",
                          "kv-channels", "vocab-size", "num-experts", "moe-ffn-hidden-size", "moe-router-topk"})
      if (a.get(k)) notes.push_back(std::string("--") + k + ": the model named by --model gives the shape");
    return m;
  }
  const std::string why = "without --model the model comes from the arguments";
  m.layers = a.need("num-layers", 1, why);
  const int64_t hidden = a.need("hidden-size", 1, why);
  const int64_t heads = a.need("num-attention-heads", 1, why);
  int64_t kv = heads;
  if (a.flag("group-query-attention")) {
    kv = a.integer("num-query-groups", 1).value_or(1);
    if (!a.get("num-query-groups")) notes.push_back("--num-query-groups absent: 1 (Megatron's default)");
  } else if (a.get("num-query-groups")) {
    notes.push_back("--num-query-groups without --group-query-attention: Megatron uses num-attention-heads");
  }
  std::ostringstream o;
  o << "model:\n  name: " << detail::yaml_scalar(a.str("name").value_or("megatron-model")) << "\n"
    << "  layers: " << m.layers << "\n  hidden: " << hidden << "\n  heads_q: " << heads << "\n  heads_kv: " << kv << "\n";
  if (const auto kc = a.integer("kv-channels", 1)) {
    o << "  head_dim: " << *kc << "\n";
  } else {
    if (hidden % heads != 0) a.fail(a.get("num-attention-heads")->values[0], "num-attention-heads",
                                    "does not divide --hidden-size; give --kv-channels");
    notes.push_back("--kv-channels absent: hidden-size / num-attention-heads (Megatron's default)");
  }
  const bool swiglu = a.flag("swiglu");
  int64_t ffn = 4 * hidden;
  if (swiglu) ffn = (4 * hidden * 2 / 3) / 64 * 64;
  if (const auto f = a.integer("ffn-hidden-size", 1)) ffn = *f;
  else notes.push_back("--ffn-hidden-size absent: " + std::to_string(ffn) + " (Megatron's default" +
                       (swiglu ? " for --swiglu)" : ")"));
  if (!swiglu) notes.push_back("no --swiglu: cpsim prices the MLP as SwiGLU (three matrices), Megatron's GeLU MLP has two");
  o << "  ffn_hidden: " << ffn << "\n"
    << "  vocab: " << a.need("vocab-size", 1, "Megatron takes it from the tokenizer; cpsim needs it given") << "\n"
    << "  tied_embeddings: " << (a.flag("untie-embeddings-and-output-weights") ? "false" : "true") << "\n";
  if (a.flag("multi-latent-attention")) {
    // Megatron's MLATransformerConfig defaults: kv_lora_rank 512, qk_head_dim 128,
    // qk_pos_emb_head_dim 64, v_head_dim 128, q_lora_rank None (no query compression).
    const int64_t nope = a.integer("qk-head-dim", 1).value_or(128), rope = a.integer("qk-pos-emb-head-dim", 0).value_or(64);
    o << "  attention_type: mla\n  mla:\n"
      << "    q_lora_rank: " << a.integer("q-lora-rank", 1).value_or(0) << "\n"
      << "    kv_lora_rank: " << a.integer("kv-lora-rank", 1).value_or(512) << "\n"
      << "    qk_nope_head_dim: " << nope << "\n    qk_rope_head_dim: " << rope << "\n"
      << "    v_head_dim: " << a.integer("v-head-dim", 1).value_or(128) << "\n";
    for (const char* k : {"q-lora-rank", "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim"})
      if (!a.get(k)) notes.push_back(std::string("--") + k + " absent: Megatron's default");
  }
  if (const auto experts = a.integer("num-experts", 1)) {
    const int64_t topk = a.integer("moe-router-topk", 1).value_or(2);
    if (!a.get("moe-router-topk")) notes.push_back("--moe-router-topk absent: 2 (Megatron's default)");
    if (topk > *experts) a.fail(a.get("moe-router-topk")->values[0], "moe-router-topk", "exceeds --num-experts");
    const int64_t shared = a.integer("moe-shared-expert-intermediate-size", 0).value_or(0);
    o << "  moe:\n    experts: " << *experts << "\n    top_k: " << topk << "\n"
      << "    expert_ffn_hidden: " << a.integer("moe-ffn-hidden-size", 1).value_or(ffn) << "\n"
      << "    shared_experts: " << (shared > 0 ? 1 : 0) << "\n    shared_expert_ffn_hidden: " << shared << "\n"
      << "    first_dense_layers: " << first_dense_layers(a, m.layers) << "\n";
    if (const auto cf = a.number("moe-expert-capacity-factor")) o << "    capacity_factor: " << *cf << "\n";
  }
  m.yaml = o.str();
  return m;
}

/// --cp-comm-type -> parallel.attention (the table in README.md).
std::string attention_entry(const Args& a, int64_t cp, std::vector<std::string>& notes) {
  std::string type = "p2p";  // Megatron's default
  if (const Arg* t = a.get("cp-comm-type")) {
    type = t->values[0].text;
    for (const auto& v : t->values)
      if (v.text != type)
        a.fail(v, "cp-comm-type", "per-layer communication types differ ('" + type + "', '" + v.text +
                                      "'); cpsim uses one scheme for every layer");
  }
  const Arg* hier = a.get("hierarchical-context-parallel-sizes");
  std::ostringstream o;
  o << "  attention:\n";
  // Megatron's get_batch_on_this_cp_rank splits every sequence into 2*cp chunks and gives rank r
  // chunks r and 2*cp-1-r, whatever the communication type: zig-zag.
  if (type == "p2p") {
    o << "    scheme: ring\n";
  } else if (type == "a2a") {
    o << "    scheme: ulysses\n";
  } else if (type == "allgather") {
    o << "    scheme: allgather\n";
  } else if (type == "a2a+p2p") {
    if (!hier)
      a.fail(a.get("cp-comm-type")->values[0], "cp-comm-type",
             "a2a+p2p needs --hierarchical-context-parallel-sizes A B (A: the all-to-all degree)");
    if (hier->values.size() != 2)
      a.fail(hier->at, "hierarchical-context-parallel-sizes",
             "cpsim's usp has two levels; give two sizes (all-to-all degree, ring degree)");
    const int64_t u = a.integer("hierarchical-context-parallel-sizes", 1).value();
    int64_t ring = 0;
    try {
      ring = std::stoll(hier->values[1].text);
    } catch (const std::exception&) {
      ring = 0;
    }
    if (ring < 1) a.fail(hier->values[1], "hierarchical-context-parallel-sizes", "expected an integer >= 1");
    if (u * ring != cp)
      a.fail(hier->at, "hierarchical-context-parallel-sizes",
             std::to_string(u) + " * " + std::to_string(ring) + " != --context-parallel-size " + std::to_string(cp));
    // The first level is adjacent ranks (the all-to-all inside the node, Megatron's help text).
    o << "    scheme: usp\n    ulysses_degree: " << u << "\n    ulysses_placement: intra-node\n";
  } else {
    a.fail(a.get("cp-comm-type")->values[0], "cp-comm-type",
           "expected p2p, a2a, allgather or a2a+p2p, got '" + type + "'");
  }
  if (hier && type != "a2a+p2p")
    notes.push_back("--hierarchical-context-parallel-sizes: used only with --cp-comm-type a2a+p2p");
  o << "    layout: zigzag\n";
  (void)cp;
  return o.str();
}

}  // namespace

MegatronImport import_megatron(const std::vector<std::string>& raw, const std::string& out_dir) {
  const Args a(raw);
  MegatronImport out;
  out.not_understood = a.not_understood;
  auto& notes = out.notes;

  const int64_t tp = a.integer("tensor-model-parallel-size", 1).value_or(1);
  const int64_t pp = a.integer("pipeline-model-parallel-size", 1).value_or(1);
  const int64_t cp = a.integer("context-parallel-size", 1).value_or(1);
  const int64_t mp = tp * cp * pp;

  // The machine: cpsim's --platform (default h100-cluster) with --nodes / --nnodes nodes.
  const std::string plat_name = a.str("platform").value_or("h100-cluster");
  if (!a.get("platform")) notes.push_back("--platform absent: h100-cluster (DGX H100 nodes on InfiniBand)");
  const PlatformSpec plat = load_platform(plat_name);
  const int64_t gpn = plat.gpus_per_node;
  if (const auto g = a.integer("nproc-per-node", 1); g && *g != gpn)
    a.fail(a.get("nproc-per-node")->values[0], "nproc-per-node",
           std::to_string(*g) + " GPUs per node, but platform '" + plat.name + "' has " + std::to_string(gpn));
  std::optional<int64_t> nodes = a.integer("nodes", 1);
  if (const auto nn = a.integer("nnodes", 1)) {
    if (nodes && *nodes != *nn)
      a.fail(a.get("nnodes")->values[0], "nnodes", "differs from --nodes " + std::to_string(*nodes));
    nodes = nn;
  }
  if (!nodes) {
    nodes = std::max<int64_t>(1, (mp + gpn - 1) / gpn);
    notes.push_back("no --nnodes/--nodes: " + std::to_string(*nodes) + " node(s), the fewest that hold tp*cp*pp");
  }
  const int64_t world = *nodes * gpn;
  if (world % mp != 0)
    a.fail(a.get("context-parallel-size") ? a.get("context-parallel-size")->at : Tok{"", 1}, "context-parallel-size",
           "tp*cp*pp = " + std::to_string(mp) + " does not divide the world size " + std::to_string(*nodes) + " x " +
               std::to_string(gpn) + " = " + std::to_string(world));
  const int64_t dp = world / mp;

  const std::string attention = cp > 1 ? attention_entry(a, cp, notes) : "";
  if (cp == 1 && a.get("cp-comm-type")) notes.push_back("--cp-comm-type: no effect with --context-parallel-size 1");
  // --attention-backend (megatron/core/transformer/enums.py AttnBackend): unfused is TE's
  // UnfusedDotProductAttention, local Megatron-Core's own DotProductAttention, both the
  // unfused path; fused is TE's cuDNN FusedAttention, flash TE's FlashAttention (FA2 unless
  // flash-attn 3 is installed); auto leaves the choice to the stack (cost.attention_kernel auto).
  std::string kernel;
  if (const auto b = a.str("attention-backend")) {
    if (*b == "unfused" || *b == "local") kernel = "unfused";
    else if (*b == "fused") kernel = "cudnn";
    else if (*b == "flash") kernel = "fa2";
    else if (*b != "auto")
      a.fail(a.get("attention-backend")->values[0], "attention-backend",
             "expected flash, fused, unfused, local or auto, got '" + *b + "'");
    if (kernel == "unfused" && cp > 1)
      a.fail(a.get("attention-backend")->values[0], "attention-backend",
             "'" + *b + "' runs without context parallelism (DotProductAttention asserts context_parallel_size == 1), "
             "but --context-parallel-size is " + std::to_string(cp));
  }
  const ModelOut model = model_entry(a, out_dir, notes);
  const int64_t seq = a.need("seq-length", 1, "it is the training sequence length");
  const int64_t mbs = a.integer("micro-batch-size", 1).value_or(1);
  std::optional<int64_t> micro_batches;
  if (const auto gbs = a.integer("global-batch-size", 1)) {
    if (*gbs % (mbs * dp) != 0)
      a.fail(a.get("global-batch-size")->values[0], "global-batch-size",
             std::to_string(*gbs) + " is not divisible by micro-batch-size * dp = " + std::to_string(mbs) + " * " +
                 std::to_string(dp));
    micro_batches = *gbs / (mbs * dp);
  } else {
    notes.push_back("--global-batch-size absent: one micro-batch per step (Megatron's default is mbs * dp)");
  }

  std::string recompute = "none";  // Megatron recomputes nothing unless asked
  if (const auto g = a.str("recompute-granularity")) {
    if (*g != "full" && *g != "selective")
      a.fail(a.get("recompute-granularity")->values[0], "recompute-granularity",
             "expected full or selective, got '" + *g + "'");
    recompute = *g;
    // Partial recomputation: training.recompute_method / recompute_layers (full only).
    if (*g == "full") {
      if (const auto method = a.str("recompute-method")) {
        if (*method != "uniform" && *method != "block")
          a.fail(a.get("recompute-method")->values[0], "recompute-method",
                 "expected uniform or block, got '" + *method + "'");
        recompute += "\n  recompute_method: " + *method;
      }
      if (const auto n = a.integer("recompute-num-layers", 1)) recompute += "\n  recompute_layers: " + std::to_string(*n);
    }
  }
  std::string optimizer_offload;
  if (a.flag("optimizer-cpu-offload")) {
    optimizer_offload = "  optimizer_cpu_offload: true\n";
    if (const auto f = a.str("optimizer-offload-fraction"))
      optimizer_offload += "  optimizer_offload_fraction: " + *f + "\n";
  }
  std::string precision;
  if (const auto f = a.str("fp8-format")) {
    if (*f != "e4m3" && *f != "hybrid")
      a.fail(a.get("fp8-format")->values[0], "fp8-format", "expected e4m3 or hybrid, got '" + *f + "'");
    precision = "fp8";
  } else if (a.flag("fp8")) {
    precision = "fp8";
  }
  // --fp8-recipe (Megatron's arguments.py choices: delayed, tensorwise, mxfp8, blockwise).
  std::string recipe;
  if (const auto r = a.str("fp8-recipe")) {
    if (*r != "delayed" && *r != "tensorwise" && *r != "mxfp8" && *r != "blockwise")
      a.fail(a.get("fp8-recipe")->values[0], "fp8-recipe",
             "expected delayed, tensorwise, mxfp8 or blockwise, got '" + *r + "'");
    recipe = *r;
  }
  if (a.flag("fp16")) notes.push_back("--fp16: modelled as BF16 (the same 2-byte tensors and tensor-core rate)");
  if (a.flag("bf16")) notes.push_back("--bf16: cpsim's default precision");

  int64_t vstages = 1;
  if (const auto v = a.integer("num-layers-per-virtual-pipeline-stage", 1)) {
    if (model.layers % (pp * *v) != 0)
      a.fail(a.get("num-layers-per-virtual-pipeline-stage")->values[0], "num-layers-per-virtual-pipeline-stage",
             "layers " + std::to_string(model.layers) + " are not divisible by pp * " + std::to_string(*v));
    vstages = model.layers / pp / *v;
  }
  if (const auto v = a.integer("num-virtual-stages-per-pipeline-rank", 1)) vstages = *v;

  std::ostringstream o;
  o << "# Written by `cpsim import megatron` from the arguments:\n";
  std::string line = "#  ";
  for (const auto& arg : raw) {
    const std::string r = detail::comment_text(arg);
    if (line.size() + r.size() > 100 && line.size() > 3) {
      o << line << "\n";
      line = "#  ";
    }
    line += " " + r;
  }
  o << line << "\n";
  if (!out.not_understood.empty()) o << detail::comment_lines("not understood", out.not_understood);
  o << "name: " << detail::yaml_scalar(a.str("name").value_or("megatron-import")) << "\n"
    << "platform:\n  preset: " << detail::yaml_scalar(plat_name) << "\n  nodes: " << *nodes << "\n"
    << model.yaml << "training:\n  seq_len: " << seq << "\n  micro_batch: " << mbs << "\n";
  if (micro_batches) o << "  micro_batches: " << *micro_batches << "\n";
  o << "  recompute: " << recompute << "\n" << optimizer_offload;
  if (!precision.empty()) o << "  precision: " << precision << "\n";
  if (!precision.empty() && !recipe.empty()) o << "  fp8_recipe: " << recipe << "\n";
  o << "  stack: megatron-te  # Megatron-Core with TransformerEngine's fused kernels\n";
  o << "parallel:\n  tp: " << tp << "\n  cp: " << cp << "\n  pp: " << pp << "\n  dp: " << dp << "\n"
    << "  order: tp-cp-dp-pp  # Megatron's rank order tp-cp-ep-dp-pp, innermost first\n";
  if (a.flag("sequence-parallel")) o << "  sequence_parallel: true\n";
  if (vstages > 1) o << "  virtual_stages: " << vstages << "\n";
  o << "  zero_stage: " << (a.flag("use-distributed-optimizer") ? 1 : 0) << "\n";
  if (const auto ep = a.integer("expert-model-parallel-size", 1); ep && *ep > 1) o << "  ep: " << *ep << "\n";
  if (const auto et = a.integer("expert-tensor-parallel-size", 1)) {
    o << "  expert_tp: " << *et << "\n";
  } else if (a.get("num-experts") || a.get("expert-model-parallel-size")) {
    o << "  expert_tp: " << tp << "\n";
    notes.push_back("--expert-tensor-parallel-size absent: tp (Megatron's default)");
  }
  if (a.flag("tp-comm-overlap")) o << "  tp_comm_overlap: true\n";
  // Megatron's DDP options (distributed_data_parallel_config.py); --ddp-bucket-size counts
  // parameters, dp_bucket bytes of the reduced gradients.
  if (a.flag("overlap-grad-reduce")) o << "  overlap_grad_reduce: true\n";
  if (a.flag("overlap-param-gather")) o << "  overlap_param_gather: true\n";
  if (a.flag("align-param-gather")) o << "  align_param_gather: true\n";
  if (a.flag("grad-reduce-in-bf16")) o << "  grad_reduce_dtype: bf16\n";
  if (const auto b = a.integer("ddp-bucket-size", 1))
    o << "  dp_bucket: " << *b * (a.flag("grad-reduce-in-bf16") ? 2 : 4) << "\n";
  o << attention;
  if (!kernel.empty())
    o << "cost:\n  attention_kernel: " << kernel << "  # --attention-backend " << *a.str("attention-backend") << "\n";
  o << "simulation:\n  scope: step\n";
  out.yaml = o.str();
  return out;
}

}  // namespace cpsim::scenario
