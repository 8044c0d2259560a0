// Scenario files -> Scenario, with the checks that relate the platform, the model and the
// parallel layout.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "scenario/builders.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"
#include "scenario/dp_keys.hpp"
#include "scenario/moe_keys.hpp"

namespace cpsim::scenario {
namespace detail {
namespace {

constexpr int64_t kMaxSeqLen = int64_t{1} << 40;
/// The schedule counts causal pairs, d(d+1)/2 per document summed over documents, in int64.
constexpr double kMaxPairs = 9223372036854775807.0;
/// Random documents are drawn one by one: at most this many (seq_len / mean).
constexpr int64_t kMaxDocuments = 1'000'000;
const Node kEmpty;

std::string str(int64_t v) { return std::to_string(v); }

const Node& or_empty(const Node* n) { return n ? *n : kEmpty; }

std::string fmt_pairs(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// The place to point at for a key that may be absent: the key itself, else its mapping.
const Node& where(const Node* key, const Node& parent) { return key ? *key : parent; }

struct TrainingNodes {
  const Node* root = nullptr;
  const Node* seq_len = nullptr;
  const Node* documents = nullptr;
  const Node* doc_mean = nullptr;
  const Node* offload = nullptr;
  const Node* selective_ac = nullptr;
  const Node* optimizer_offload = nullptr;
};

TrainingSpec read_training(const Node& n, TrainingNodes& nodes) {
  MapReader r(n, {"seq_len", "micro_batch", "micro_batches", "recompute", "recompute_method",
                  "recompute_layers", "selective_ac_option", "offload_layers", "optimizer_cpu_offload",
                  "optimizer_offload_fraction", "documents", "loss", "precision", "fp8_attention",
                  "fp8_recipe", "stack"});
  TrainingSpec t;
  nodes.root = &n;
  const Node& sl = r.require("seq_len");
  nodes.seq_len = &sl;
  t.seq_len = as_tokens(sl);
  check_min(sl, static_cast<double>(t.seq_len), 1, true);
  if (t.seq_len > kMaxSeqLen) fail_at(sl, "seq_len " + sl.scalar + " exceeds the limit of 2^40 tokens");
  if (const Node* v = r.get("micro_batch")) t.micro_batch = static_cast<int>(as_int(*v, 1, 1'000'000));
  if (const Node* v = r.get("micro_batches")) t.micro_batches = static_cast<int>(as_int(*v, 1, 1'000'000'000));
  if (const Node* v = r.get("recompute")) {
    t.recompute = static_cast<Recompute>(as_choice(*v, choices(kRecomputeNames)));
  }
  // Megatron accepts --recompute-method / --recompute-num-layers only with granularity full.
  if (const Node* v = r.get("recompute_method")) {
    t.recompute_method = static_cast<TrainingSpec::RecomputeMethod>(as_choice(*v, {"uniform", "block"}));
    if (t.recompute != Recompute::Full) fail_at(*v, "needs training.recompute: full (Megatron's --recompute-method "
                                                    "applies to --recompute-granularity full)");
  }
  if (const Node* v = r.get("recompute_layers")) {
    t.recompute_layers = static_cast<int>(as_int(*v, 1, 1'000'000));
    if (t.recompute != Recompute::Full) fail_at(*v, "needs training.recompute: full (Megatron's --recompute-num-layers "
                                                    "applies to --recompute-granularity full)");
  }
  // torchtitan's activation_checkpoint.selective_ac_option: "op" or a positive layer frequency,
  // read only with mode selective.
  if (const Node* v = r.get("selective_ac_option")) {
    nodes.selective_ac = v;
    if (t.recompute != Recompute::Selective)
      fail_at(*v, "needs training.recompute: selective (torchtitan reads selective_ac_option only with "
                  "activation_checkpoint.mode selective)");
    if (v->is_scalar() && v->scalar == "op") {
      t.selective_ac = TrainingSpec::SelectiveAc::Op;
    } else if (v->is_scalar() && !v->scalar.empty() &&
               v->scalar.find_first_not_of("0123456789") == std::string::npos) {
      t.selective_ac = TrainingSpec::SelectiveAc::Layer;
      t.selective_ac_every = static_cast<int>(as_int(*v, 1, 1'000'000));
    } else {
      fail_at(*v, "expected 'op' or a positive integer (checkpoint every Nth block), got '" + v->scalar + "'");
    }
  }
  // Megatron: --optimizer-cpu-offload turns it on, --optimizer-offload-fraction (default 1.0)
  // says how much of the optimizer's parameters go to the host.
  if (const Node* v = r.get("optimizer_cpu_offload")) {
    nodes.optimizer_offload = v;
    t.optimizer_offload_fraction = as_bool(*v) ? 1.0 : 0.0;
  }
  if (const Node* v = r.get("optimizer_offload_fraction")) {
    if (!nodes.optimizer_offload || t.optimizer_offload_fraction == 0)
      fail_at(*v, "needs training.optimizer_cpu_offload: true (Megatron reads --optimizer-offload-fraction only "
                  "with --optimizer-cpu-offload)");
    t.optimizer_offload_fraction = as_number(*v);
    check_min(*v, t.optimizer_offload_fraction, 0, false);
    if (t.optimizer_offload_fraction > 1)
      fail_at(*v, "expected a fraction from 0 to 1, got " + v->scalar);
  }
  if (const Node* v = r.get("offload_layers")) {
    nodes.offload = v;
    t.offload_layers = static_cast<int>(as_int(*v, 0, 1'000'000));
    // Megatron's transformer_config.py: "CPU offloading does not work when activation
    // recomputation is enabled".
    if (t.offload_layers > 0 && t.recompute != Recompute::None)
      fail_at(*v, "needs training.recompute: none (Megatron: CPU offloading does not work when activation "
                  "recomputation is enabled)");
  }
  if (const Node* v = r.get("loss"))
    t.loss = static_cast<Loss>(as_choice(*v, choices(kLossNames)));
  if (const Node* d = r.get("documents")) {
    nodes.documents = d;
    if (d->is_seq()) {
      if (d->children.empty()) fail_at(*d, "expected at least one document length");
      for (const auto& c : d->children) {
        const int64_t len = as_tokens(c);
        check_min(c, static_cast<double>(len), 1, true);
        if (len > kMaxSeqLen) fail_at(c, "document length " + c.scalar + " exceeds the limit of 2^40 tokens");
        t.documents.push_back(len);
      }
    } else if (d->is_map()) {
      MapReader dr(*d, {"distribution", "mean", "seed"});
      const Node& dist = dr.require("distribution");
      t.doc_distribution = as_choice(dist, {"uniform", "lognormal"}) == 0 ? "uniform" : "lognormal";
      const Node& mean = dr.require("mean");
      nodes.doc_mean = &mean;
      t.doc_mean_tokens = as_tokens(mean);
      check_min(mean, static_cast<double>(t.doc_mean_tokens), 1, true);
      if (const Node* s = dr.get("seed")) t.doc_seed = as_uint64(*s);
    } else {
      fail_at(*d, "expected a list of document lengths such as [32K, 96K] or a mapping "
                  "{distribution: uniform|lognormal, mean, seed}, got " + d->describe());
    }
  }
  read_precision(r, t);
  return t;
}

struct ParallelNodes {
  const Node* root = nullptr;
  const Node* tp = nullptr;
  const Node* cp = nullptr;
  const Node* pp = nullptr;
  const Node* attention = nullptr;
  const Node* scheme = nullptr;
  const Node* layout = nullptr;
  const Node* ulysses_degree = nullptr;
  const Node* inner_ring = nullptr;
  const Node* replicate = nullptr;
  const Node* linear_scheme = nullptr;
};

std::vector<std::string> read_order(const Node& n) {
  std::vector<std::string> parts;
  if (n.is_scalar()) {
    std::string cur;
    for (char c : n.scalar + "-") {
      if (c == '-' || c == ',' || c == ' ') {
        if (!cur.empty()) parts.push_back(cur);
        cur.clear();
      } else {
        cur.push_back(c);
      }
    }
  } else if (n.is_seq()) {
    for (const auto& c : n.children) parts.push_back(as_string(c));
  }
  std::vector<std::string> sorted = parts;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != std::vector<std::string>{"cp", "dp", "pp", "tp"})
    fail_at(n, "expected a permutation of tp, cp, pp, dp (innermost first) such as tp-cp-pp-dp, got " +
                   (n.is_scalar() ? "'" + n.scalar + "'" : "[" + join(parts) + "]"));
  return parts;
}

ParallelSpec read_parallel(const Node& n, ParallelNodes& nodes) {
  std::vector<std::string> keys = {"tp", "cp", "pp", "dp", "sequence_parallel", "order", "virtual_stages",
                                   "zero_stage", "attention", "linear_attention", "ep", "expert_tp",
                                   "tp_comm_overlap"};
  keys.insert(keys.end(), std::begin(kDpKeys), std::end(kDpKeys));
  MapReader r(n, keys);
  ParallelSpec p;
  nodes.root = &n;
  nodes.tp = r.get("tp");
  nodes.cp = r.get("cp");
  nodes.pp = r.get("pp");
  if (nodes.tp) p.tp = static_cast<int>(as_int(*nodes.tp, 1, kMaxGpus));
  if (nodes.cp) p.cp = static_cast<int>(as_int(*nodes.cp, 1, kMaxGpus));
  if (nodes.pp) p.pp = static_cast<int>(as_int(*nodes.pp, 1, kMaxGpus));
  if (const Node* v = r.get("dp")) p.dp = static_cast<int>(as_int(*v, 1, kMaxGpus));
  const double world = double(p.tp) * p.cp * p.pp * p.dp;
  if (world > kMaxGpus)
    fail_key(n, "tp*cp*pp*dp = " + str(p.tp) + "*" + str(p.cp) + "*" + str(p.pp) + "*" + str(p.dp) +
                         " exceeds the limit of 1000000 GPUs");
  if (const Node* v = r.get("sequence_parallel")) p.sequence_parallel = as_bool(*v);
  if (const Node* v = r.get("order")) p.order = read_order(*v);
  if (const Node* v = r.get("virtual_stages")) p.virtual_stages = static_cast<int>(as_int(*v, 1, 1'000'000));
  if (const Node* v = r.get("zero_stage")) p.zero_stage = static_cast<int>(as_int(*v, 0, 3));
  read_dp_parallel(r, p);
  read_moe_parallel(r, p);

  const Node* att = r.get("attention");
  nodes.attention = att;
  MapReader a(or_empty(att), {"scheme", "layout", "stripe_width", "ulysses_degree", "ulysses_placement",
                              "replicate_kv_heads", "dkv_fp32", "inner_ring", "document_sharding"});
  AttentionSpec& s = p.attention;
  if (const Node* v = a.get("scheme")) {
    nodes.scheme = v;
    s.scheme = static_cast<AttentionScheme>(as_choice(*v, choices(kSchemeNames)));
  }
  if (const Node* v = a.get("layout")) {
    nodes.layout = v;
    s.layout = static_cast<Layout>(as_choice(*v, choices(kLayoutNames)));
  }
  if (const Node* v = a.get("stripe_width")) s.stripe_width = static_cast<int>(as_int(*v, 1, 1 << 30));
  if (const Node* v = a.get("ulysses_degree")) {
    nodes.ulysses_degree = v;
    s.ulysses_degree = static_cast<int>(as_int(*v, 0, kMaxGpus));
  }
  if (const Node* v = a.get("ulysses_placement"))
    s.ulysses_placement = static_cast<UlyssesPlacement>(as_choice(*v, choices(kUlyssesPlacementNames)));
  if (const Node* v = a.get("replicate_kv_heads")) {
    nodes.replicate = v;
    s.replicate_kv_heads = as_bool(*v);
  }
  if (const Node* v = a.get("dkv_fp32")) s.dkv_fp32 = as_bool(*v);
  if (const Node* v = a.get("inner_ring")) {
    nodes.inner_ring = v;
    s.inner_ring = static_cast<int>(as_int(*v, 0, kMaxGpus));
  }
  if (const Node* v = a.get("document_sharding"))
    s.per_document_sharding = as_choice(*v, choices(kDocumentShardingNames)) == 1;

  const Node* lin = r.get("linear_attention");
  MapReader l(or_empty(lin), {"scheme"});
  if (const Node* v = l.get("scheme")) {
    nodes.linear_scheme = v;
    p.linear = static_cast<LinearScheme>(as_choice(*v, choices(kLinearSchemeNames)));
  }
  return p;
}

/// cost.profile: auto, none, a CSV path (relative to the scenario, else to the data directory)
/// or a profile name in kernels/profiles/.
std::string read_profile(const Node& n,
                         const std::string& expected = "auto, none, or a profile CSV") {
  const std::string v = as_string(n);
  if (expected.starts_with("auto, none") && (v == "auto" || v == "none")) return v;
  namespace fs = std::filesystem;
  std::vector<std::string> tried;
  auto try_path = [&](const std::string& p) {
    tried.push_back(p);
    std::error_code ec;
    if (fs::is_directory(p, ec)) fail_at(n, "cost.profile '" + v + "' is a directory, not a profile CSV");
    return fs::is_regular_file(p, ec);
  };
  const std::string base = n.at.src ? n.at.src->dir : std::string();
  const bool path_like = v.find('/') != std::string::npos || v.ends_with(".csv");
  if (path_like) {
    if (std::string p = join_path(base, v); try_path(p)) return p;
    if (!fs::path(v).is_absolute())
      if (std::string p = join_path(data_dir(), v); try_path(p)) return p;
  } else {
    if (std::string p = join_path(data_dir(), "kernels/profiles/" + v + ".csv"); try_path(p)) return p;
  }
  fail_at(n, "expected " + expected + "; '" + v + "' not found (tried " + join(tried) + ")");
}

/// The checks that relate several keys; every message names both ends.
void cross_check(const Scenario& s, const Node& root, const ParallelNodes& pn, const TrainingNodes& tn,
                 const std::vector<const Node*>& rank_keys) {
  const ParallelSpec& p = s.parallel;
  const ModelSpec& m = s.model;
  const int64_t world = int64_t{p.tp} * p.cp * p.pp * p.dp;
  const Node& par = pn.root ? *pn.root : root;

  if (world > s.platform.total_gpus())
    fail_key(par, "tp*cp*pp*dp = " + str(p.tp) + "*" + str(p.cp) + "*" + str(p.pp) + "*" +
                           str(p.dp) + " = " + str(world) + " GPUs, but platform '" + s.platform.name +
                           "' has " + str(s.platform.total_gpus()) + " GPUs (nodes " +
                           str(s.platform.nodes) + " x gpus_per_node " + str(s.platform.gpus_per_node) + ")");

  if (p.pp * int64_t{p.virtual_stages} > m.layers)
    fail_at(where(pn.pp, par), "pp*virtual_stages = " + str(p.pp) + "*" + str(p.virtual_stages) +
                                   " pipeline stages exceed model '" + m.name + "' with " + str(m.layers) +
                                   " layers");

  const bool has_full =
      std::find(m.pattern.begin(), m.pattern.end(), LayerKind::FullAttention) != m.pattern.end();
  if (p.tp > 1 && m.heads_q % p.tp != 0)
    fail_at(where(pn.tp, par), "model '" + m.name + "' heads_q " + str(m.heads_q) +
                                   " is not divisible by parallel.tp = " + str(p.tp));

  const AttentionSpec& a = p.attention;
  const Node& att = pn.attention ? *pn.attention : par;
  int u = 0;  // Ulysses degree
  const Node* u_node = nullptr;
  std::string u_name;
  if (a.scheme == AttentionScheme::Ulysses) {
    u = p.cp;
    u_node = pn.cp ? pn.cp : pn.scheme;
    u_name = "parallel.cp with scheme ulysses";
  } else if (a.scheme == AttentionScheme::Usp) {
    if (a.ulysses_degree == 0)
      fail_key(att, "scheme usp needs parallel.attention.ulysses_degree (the head-split degree; "
                         "the ring degree is cp / ulysses_degree)");
    u = a.ulysses_degree;
    u_node = pn.ulysses_degree;
    u_name = "parallel.attention.ulysses_degree";
    if (p.cp % u != 0)
      fail_at(*u_node, "ulysses_degree " + str(u) + " does not divide parallel.cp = " + str(p.cp));
  }
  if (u > 1 && has_full) {
    const Node& at = where(u_node, par);
    const int hq = m.heads_q / p.tp;
    const std::string per_tp = p.tp > 1 ? " / tp " + str(p.tp) + " = " + str(hq) + " per TP rank" : "";
    if (hq % u != 0)
      fail_at(at, "model '" + m.name + "' heads_q " + str(m.heads_q) + per_tp +
                      " is not divisible by the Ulysses degree " + str(u) + " (" + u_name + ")");
    const int hkv = std::max(1, m.heads_kv / p.tp);
    if (hkv % u != 0) {
      if (!a.replicate_kv_heads)
        fail_at(where(pn.replicate, at),
                "model '" + m.name + "' heads_kv " + str(m.heads_kv) + " is not divisible by the Ulysses degree " +
                    str(u) + " (" + u_name + ") and replicate_kv_heads is false");
      if (u % hkv != 0)
        fail_at(at, "model '" + m.name + "' heads_kv " + str(m.heads_kv) +
                        " can neither be split nor evenly replicated over the Ulysses degree " + str(u) + " (" +
                        u_name + ")");
    }
  }

  // Linear-attention all-to-all splits the value and key heads of each TP rank over the CP group.
  const bool has_linear =
      std::find(m.pattern.begin(), m.pattern.end(), LayerKind::LinearAttention) != m.pattern.end();
  if (p.linear == LinearScheme::AllToAll && has_linear && p.cp > 1) {
    const int hv = std::max(1, m.linear_heads_v / p.tp), hk = std::max(1, m.linear_heads_k / p.tp);
    if (hv % p.cp != 0 || hk % p.cp != 0)
      fail_at(*pn.linear_scheme, "linear_attention scheme a2a splits heads over parallel.cp = " + str(p.cp) +
                                     ", but model '" + m.name + "' has linear heads_v " + str(m.linear_heads_v) +
                                     " and heads_k " + str(m.linear_heads_k) +
                                     (p.tp > 1 ? " (/ tp " + str(p.tp) + " = " + str(hv) + " and " + str(hk) + " per TP rank)" : "") +
                                     ", not both divisible by it");
  }

  if (a.scheme == AttentionScheme::DoubleRing && a.inner_ring > 0 && p.cp % a.inner_ring != 0)
    fail_at(*pn.inner_ring, "inner_ring " + str(a.inner_ring) + " does not divide parallel.cp = " + str(p.cp));

  const int64_t seq = s.training.seq_len;
  const Node& sl = *tn.seq_len;
  if (p.cp > 1) {
    int64_t div = p.cp;
    std::string why = "cp = " + str(p.cp) + " (layout contiguous splits the sequence into cp blocks)";
    std::string by = "parallel.";
    if (a.layout == Layout::ZigZag) {
      div = 2 * int64_t{p.cp};
      by = "2*parallel.";
      why = "cp = " + str(div) + " (layout zigzag splits the sequence into 2*cp chunks)";
    } else if (a.layout == Layout::Striped) {
      div = int64_t{p.cp} * a.stripe_width;
      why = "cp*attention.stripe_width = " + str(p.cp) + "*" + str(a.stripe_width) + " = " + str(div) +
            " (layout striped deals stripes round-robin)";
    }
    if (seq % div != 0) fail_at(sl, "seq_len " + str(seq) + " is not divisible by " + by + why);
  }
  if (p.sequence_parallel && p.tp > 1 && (seq / p.cp) % p.tp != 0)
    fail_at(sl, "seq_len / cp = " + str(seq / p.cp) + " tokens per CP rank is not divisible by parallel.tp = " +
                    str(p.tp) + " (sequence parallelism splits them over the TP group)");

  if (!s.training.documents.empty()) {
    int64_t sum = 0;
    for (int64_t d : s.training.documents) sum += d;
    if (sum != seq)
      fail_at(*tn.documents, "document lengths sum to " + str(sum) + " tokens but training.seq_len is " +
                                 str(seq));
  }
  if (tn.doc_mean && s.training.doc_mean_tokens > seq)
    fail_at(*tn.doc_mean, "mean document length " + str(s.training.doc_mean_tokens) +
                              " exceeds training.seq_len " + str(seq));

  // Sizes the schedule cannot hold: pair counts past int64, millions of random documents.
  auto pairs = [](double d) { return d * (d + 1) / 2; };
  if (!s.training.documents.empty()) {
    double sum = 0;
    for (int64_t d : s.training.documents) sum += pairs(static_cast<double>(d));
    if (sum > kMaxPairs)
      fail_at(*tn.documents, "the documents hold " + fmt_pairs(sum) + " causal pairs, more than the "
                             "2^63 - 1 the simulator counts; use shorter documents");
  } else if (tn.doc_mean) {
    const int64_t mean = s.training.doc_mean_tokens;
    if (seq / mean > kMaxDocuments)
      fail_at(*tn.doc_mean, "seq_len " + str(seq) + " / mean " + str(mean) + " = " + str(seq / mean) +
                                " documents exceed the limit of " + str(kMaxDocuments) + "; raise the mean");
    // Uniform lengths stay below 2*mean, so sum d(d+1)/2 <= mean * seq_len; lognormal ones
    // are held to the same bound.
    if (static_cast<double>(mean) * static_cast<double>(seq) > kMaxPairs)
      fail_at(*tn.doc_mean, "documents of mean " + str(mean) + " over seq_len " + str(seq) + " may hold up to " +
                                fmt_pairs(static_cast<double>(mean) * static_cast<double>(seq)) +
                                " causal pairs, more than the 2^63 - 1 the simulator counts; lower the mean");
  } else if (pairs(static_cast<double>(seq)) > kMaxPairs) {
    fail_at(sl, "seq_len " + str(seq) + " as one document holds " + fmt_pairs(pairs(static_cast<double>(seq))) +
                    " causal pairs, more than the 2^63 - 1 the simulator counts (at most 4294967295 tokens); "
                    "pack shorter documents with training.documents");
  }

  if (tn.offload && s.training.offload_layers > 0) {
    // Megatron: no pipeline parallelism with CPU offloading, and fewer layers than the model's.
    if (s.parallel.pp > 1)
      fail_at(*tn.offload, "needs parallel.pp = 1 (Megatron: no support for pipeline parallelism with CPU "
                           "offloading), got pp " + str(s.parallel.pp));
    if (s.training.offload_layers >= s.model.layers)
      fail_at(*tn.offload, "must be less than the model's " + str(s.model.layers) + " layers, got " +
                               str(s.training.offload_layers));
  }
  if (tn.optimizer_offload && s.training.optimizer_offload_fraction > 0 && s.parallel.zero_stage >= 3)
    fail_at(*tn.optimizer_offload, "applies to Megatron's optimizers (parallel.zero_stage 0-2); FSDP "
                                   "(zero_stage 3) keeps its optimizer states with its parameter shards");
  if (tn.selective_ac && s.training.selective_ac == TrainingSpec::SelectiveAc::Op) {
    // The op policy is priced from a dense attention block's seven matmuls (wq, wk, wv, wo, w1,
    // w3, w2 in torchtitan's Llama order); other blocks run other op sequences.
    const auto& m = s.model;
    bool linear = false;
    for (const auto k : m.pattern) linear = linear || k == LayerKind::LinearAttention;
    if (m.moe.experts > 0 || m.mla || linear)
      fail_at(*tn.selective_ac, "op applies to dense full-attention models (torchtitan's Llama blocks); this model "
                                "has " + std::string(m.moe.experts > 0 ? "MoE layers" : m.mla ? "MLA" : "linear-attention layers") +
                                "; use a layer frequency (selective_ac_option: 2) or recompute: full");
  }
  check_moe(s, par, or_empty(tn.root));
  check_dp(s.parallel, par);

  for (const Node* k : rank_keys) {
    const int rank = std::stoi(k->key);
    if (rank >= world)
      fail_key(*k, "GPU rank " + k->key + " is outside the " + str(world) + " GPUs of parallel.tp*cp*pp*dp");
  }
}

}  // namespace

Scenario build_scenario(const Node& root, const std::string& file, bool cross_checks) {
  MapReader r(root, {"name", "description", "platform", "model", "training", "parallel", "simulation", "cost",
                     "perturb", "mode", "memory"});
  Scenario s;
  s.file = file;
  s.name = r.get("name") ? as_string(*r.get("name")) : file_stem(file);
  if (const Node* d = r.get("description")) as_string(*d);
  if (const Node* v = r.get("mode")) s.mode = static_cast<Mode>(as_choice(*v, choices(kModeNames)));

  const Node& plat = r.require("platform");
  std::string plat_file;
  const Node plat_tree = resolve_ref(plat, platform_ref(), &plat_file);
  if (plat_file.empty()) plat_file = file;
  s.platform = build_platform(plat_tree, plat_file, plat_file == file ? "inline" : file_stem(plat_file));

  const Node& model = r.require("model");
  std::string model_file;
  const Node model_tree = resolve_ref(model, model_ref(), &model_file);
  s.model = build_model(model_tree, model_file.empty() ? "inline" : file_stem(model_file));

  TrainingNodes tn;
  s.training = read_training(r.require("training"), tn);
  ParallelNodes pn;
  s.parallel = read_parallel(or_empty(r.get("parallel")), pn);
  if (!r.get("parallel")) pn.root = nullptr;

  MapReader sim(or_empty(r.get("simulation")), {"engine", "scope", "seed", "collectives", "symmetry"});
  if (const Node* v = sim.get("engine"))
    s.simulation.engine = static_cast<EngineKind>(as_choice(*v, choices(kEngineNames)));
  if (const Node* v = sim.get("scope")) s.simulation.scope = static_cast<Scope>(as_choice(*v, choices(kScopeNames)));
  if (const Node* v = sim.get("seed")) s.simulation.seed = as_uint64(*v);
  if (const Node* v = sim.get("collectives"))
    s.simulation.collectives = static_cast<CollectiveModel>(as_choice(*v, choices(kCollectiveModelNames)));
  if (const Node* v = sim.get("symmetry"))
    s.simulation.symmetry = static_cast<Symmetry>(as_choice(*v, choices(kSymmetryNames)));

  MapReader cost(or_empty(r.get("cost")), {"profile", "attention_kernel"});
  if (const Node* v = cost.get("profile")) s.cost.profile = read_profile(*v);
  if (const Node* v = cost.get("attention_kernel")) {
    // An implementation name, else a profile name in kernels/profiles/ (then also the profile).
    if (auto impl = parse_enum<AttnImpl>(as_string(*v), kAttnImplNames)) {
      s.cost.attention_kernel = *impl;
    } else {
      s.cost.profile =
          read_profile(*v, enum_choices(kAttnImplNames) + ", or a profile in kernels/profiles");
    }
  }
  // `auto` is the kernel the stack's own dispatch picks (shared/data/stacks.md 4): TE's
  // get_attention_backend prefers cuDNN FusedAttention over FlashAttention on sm90+ and uses
  // FlashAttention-2 on Ampere; PyTorch SDPA's default priority puts its in-tree
  // FlashAttention-2 first (cuDNN only with cuDNN > 9.15 preferred), FA3 is not its default.
  if (s.cost.attention_kernel == AttnImpl::Auto) {
    const GpuArch arch = s.platform.gpu.arch;
    if (s.training.stack == Stack::MegatronTe)
      s.cost.attention_kernel = arch == GpuArch::Hopper || arch == GpuArch::Blackwell ? AttnImpl::Cudnn : AttnImpl::Fa2;
    else
      s.cost.attention_kernel = AttnImpl::Fa2;
  }

  s.cost.stack = s.training.stack;
  // Neither framework runs the unfused path under context parallelism: Megatron-Core's
  // DotProductAttention asserts context_parallel_size == 1 ("Context parallelism is only
  // supported by TEDotProductAttention!"), and PyTorch's context_parallel dispatches only the
  // flash, efficient and cuDNN SDPA kernels.
  if (s.cost.attention_kernel == AttnImpl::Unfused && s.parallel.cp > 1) {
    const Node* v = cost.get("attention_kernel");
    const std::string msg = "unfused attention runs without context parallelism (Megatron's DotProductAttention "
                            "asserts context_parallel_size == 1; PyTorch's context_parallel has no math-SDPA path); "
                            "parallel.cp is " + std::to_string(s.parallel.cp) + ": set parallel.cp: 1 or a fused kernel";
    if (v) fail_at(*v, msg);
  }
  // FlashAttention-2 and -3 take head dims up to 256 (flash_api.cpp: "FlashAttention forward
  // only supports head dimension at most 256"): a larger one is refused, not priced as if run.
  const AttnImpl k = s.cost.attention_kernel;
  if ((k == AttnImpl::Fa2 || k == AttnImpl::Fa3) && s.model.head_dim > 256)
    if (const Node* v = cost.get("attention_kernel"))
      fail_at(*v, std::string(impl_name(k)) + " takes head dims up to 256 (FlashAttention's flash_api.cpp); model " +
                      s.model.name + " has head_dim " + std::to_string(s.model.head_dim) +
                      ": use unfused (what TransformerEngine falls back to) or cudnn");
  // memory.allocator: PYTORCH_CUDA_ALLOC_CONF as the run sets it.
  MapReader mem(or_empty(r.get("memory")), {"allocator"});
  MapReader alloc(or_empty(mem.get("allocator")), {"expandable_segments", "fragmentation"});
  if (const Node* v = alloc.get("expandable_segments")) s.memory.allocator.expandable_segments = as_bool(*v) ? 1 : 0;
  if (const Node* v = alloc.get("fragmentation")) {
    s.memory.allocator.fragmentation = as_number(*v);
    check_min(*v, s.memory.allocator.fragmentation, 0, true);
    if (s.memory.allocator.fragmentation >= 0.9)
      fail_at(*v, "a share of the reserved memory below 0.9 (e.g. 0.15), got " + v->scalar);
  }

  std::vector<const Node*> rank_keys;
  s.perturb = read_perturb(or_empty(r.get("perturb")), s.platform, rank_keys);

  if (cross_checks) cross_check(s, root, pn, tn, rank_keys);
  return s;
}

}  // namespace detail

Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<std::string>& overrides) {
  using namespace detail;
  Node root = parse_text(text, file, dir_of(file));
  for (const auto& o : overrides) apply_override(root, o, "<--set>", scenario_preset_paths());
  return build_scenario(root, file, true);
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  using namespace detail;
  Node root = parse_file(path, nullptr, "scenario");
  for (const auto& o : overrides) apply_override(root, o, "<--set>", scenario_preset_paths());
  return build_scenario(root, path, true);
}

bool key_given(const std::string& path, const std::vector<std::string>& overrides, const std::string& key_path) {
  using namespace detail;
  Node root = parse_file(path, nullptr, "scenario");
  for (const auto& o : overrides) apply_override(root, o, "<--set>", scenario_preset_paths());
  const Node* n = &root;
  for (size_t i = 0; n;) {
    const size_t dot = key_path.find('.', i);
    n = n->is_map() ? n->find(key_path.substr(i, dot == std::string::npos ? std::string::npos : dot - i)) : nullptr;
    if (dot == std::string::npos) break;
    i = dot + 1;
  }
  return n != nullptr;
}

}  // namespace cpsim::scenario
