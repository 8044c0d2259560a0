// `cpsim partition`: the lesson's interactive component. Pair counts per GPU as a text bar chart,
// the "N ring steps" table and how far the ring is from perfect balance.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/cli_checks.hpp"
#include "app/commands.hpp"
#include "scenario/enum_names.hpp"
#include "schedule/partition.hpp"
#include "report/output.hpp"
#include "support/safe_write.hpp"

namespace cpsim::app {

namespace {

using scenario::Layout;
using schedule::Documents;
using schedule::Partition;
using schedule::RingTable;

/// "16", "4K" (4096), "1M", "1.5K" -> whole tokens; binary suffixes as the scenario files use.
/// Kept local so this command does not depend on the scenario loader being linked.
int64_t parse_token_count(const std::string& text, const std::string& what) {
  std::string t = text;
  t.erase(std::remove_if(t.begin(), t.end(), [](unsigned char c) { return std::isspace(c); }),
          t.end());
  double scale = 1;
  if (!t.empty()) {
    switch (std::toupper(static_cast<unsigned char>(t.back()))) {
      case 'K':
        scale = 1024.0;
        break;
      case 'M':
        scale = 1024.0 * 1024.0;
        break;
      case 'G':
        scale = 1024.0 * 1024.0 * 1024.0;
        break;
      default:
        break;
    }
    if (scale != 1) t.pop_back();
  }
  size_t used = 0;
  double v = 0;
  bool ok = !t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.');
  if (ok) {
    try {
      v = std::stod(t, &used) * scale;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != t.size())
    throw std::invalid_argument(what + ": '" + text +
                                "' is not a token count (examples: 16, 4096, 4K, 1M)");
  if (v != std::floor(v) || v < 1 || v > 9.0e18)
    throw std::invalid_argument(what + ": '" + text + "' is not a positive whole number of tokens");
  return static_cast<int64_t>(v);
}

Layout parse_layout(const std::string& s) {
  if (s == "zig-zag") return Layout::ZigZag;
  if (const auto l = scenario::parse_enum<Layout>(s, scenario::kLayoutNames)) return *l;
  throw std::invalid_argument("--layout: '" + s + "' is not one of: " + scenario::enum_choices(scenario::kLayoutNames));
}

const char* layout_name(Layout l) { return scenario::name_of(l, scenario::kLayoutNames); }

struct Options {
  std::string seq, layout, stripe_width = "1", docs, doc_mean, doc_dist = "lognormal", json;
  std::string mask = "causal", window, sharding = "whole-sequence";
  int cp = 0;
  uint64_t seed = 1;
};

Documents make_documents(const Options& o, int64_t seq_len) {
  if (!o.docs.empty()) {
    std::vector<int64_t> lengths;
    std::stringstream ss(o.docs);
    for (std::string item; std::getline(ss, item, ',');)
      lengths.push_back(parse_token_count(item, "--docs"));
    Documents d = Documents::from_lengths(lengths);
    if (d.seq_len != seq_len)
      throw std::invalid_argument("--docs: the lengths sum to " + std::to_string(d.seq_len) +
                                  " tokens, but --seq is " + std::to_string(seq_len));
    return d;
  }
  if (!o.doc_mean.empty())
    return Documents::random(seq_len, parse_token_count(o.doc_mean, "--doc-mean"), o.doc_dist,
                             o.seed);
  return Documents::single(seq_len);
}

int num_width(int64_t v) { return static_cast<int>(std::to_string(v).size()); }

void print_report(std::ostream& out, const Partition& p, const Documents& docs, const RingTable& t,
                  int64_t stripe_width) {
  const int n = p.ranks;
  const int64_t total = schedule::total_pairs(docs);  // throws if it overflows int64
  const size_t ndocs = std::max<size_t>(1, docs.starts.size());
  out << "cpsim partition: s = " << p.seq_len << " tokens, cp = " << n << ", layout "
      << layout_name(p.layout);
  if (p.layout == Layout::Striped) out << " (stripe width " << stripe_width << ")";
  out << ", " << ndocs << (ndocs == 1 ? " document" : " documents");
  if (docs.mask == scenario::AttentionMask::Full) out << ", full (bidirectional) mask";
  if (docs.mask == scenario::AttentionMask::SlidingWindow) out << ", sliding window " << docs.window;
  out << "\n\n";

  // Per-document sharding: each rank's slices of every document.
  if (p.chunks.size() > 0 && p.chunks[0].size() > 2 && p.layout == Layout::ZigZag) {
    out << "per-document chunks (each document in 2 x " << n << " chunks; GPU r holds chunks r and "
        << 2 * n - 1 << " - r of each):\n";
    for (int r = 0; r < n; ++r) {
      const auto& runs = p.chunks[static_cast<size_t>(r)];
      out << "  GPU " << std::setw(num_width(n - 1)) << r << "  " << std::setw(num_width(p.seq_len))
          << p.tokens_of(r) << " tokens in " << runs.size() << " chunks:";
      const size_t show = std::min<size_t>(runs.size(), 8);
      for (size_t i = 0; i < show; ++i)
        out << " [" << runs[i].begin << "," << runs[i].begin + runs[i].length << ")";
      if (show < runs.size()) out << " ...";
      out << "\n";
    }
    out << "\n";
  }

  // (a) bar chart
  out << (docs.mask == scenario::AttentionMask::Causal
              ? "(i, j) pairs per GPU (j <= i, same document):\n"
              : docs.mask == scenario::AttentionMask::Full
                    ? "(i, j) pairs per GPU (same document):\n"
                    : "(i, j) pairs per GPU (i - window < j <= i, same document):\n");
  const int64_t mx = *std::max_element(t.per_rank.begin(), t.per_rank.end());
  const int bar_max = 50, lw = num_width(n - 1);
  for (int r = 0; r < n; ++r) {
    const int64_t v = t.per_rank[static_cast<size_t>(r)];
    const int len =
        mx == 0
            ? 0
            : static_cast<int>(static_cast<double>(v) * bar_max / static_cast<double>(mx) + 0.5);
    out << "  GPU " << std::setw(lw) << r << "  " << std::string(static_cast<size_t>(len), '#')
        << std::string(static_cast<size_t>(bar_max - len), ' ') << "  " << v << "\n";
  }

  // (b) ring steps: rows = steps, columns = GPUs, last column = slowest
  out << "\n"
      << n << " ring steps (pairs per GPU; at step t GPU r uses the K,V of GPU (r - t) mod " << n
      << "):\n";
  int w = std::max(num_width(mx), num_width(t.ring_total));
  w = std::max(w, 4 + lw);        // "GPU k"
  const int sw = std::max(w, 7);  // "slowest"
  std::ostringstream head;
  head << std::setw(5) << "step";
  for (int r = 0; r < n; ++r) head << "  " << std::setw(w) << ("GPU " + std::to_string(r));
  head << "  | " << std::setw(sw) << "slowest";
  out << head.str() << "\n";
  for (int s = 0; s < n; ++s) {
    out << std::setw(5) << s;
    for (int r = 0; r < n; ++r)
      out << "  " << std::setw(w) << t.per_step[static_cast<size_t>(s)][static_cast<size_t>(r)];
    out << "  | " << std::setw(sw) << t.slowest_per_step[static_cast<size_t>(s)] << "\n";
  }
  out << std::setw(5) << "sum";
  for (int r = 0; r < n; ++r) out << "  " << std::setw(w) << t.per_rank[static_cast<size_t>(r)];
  out << "  | " << std::setw(sw) << t.ring_total << "\n\n";

  // (c) totals
  const double ratio = t.balanced_total == 0 ? 1.0
                                             : static_cast<double>(t.ring_total) /
                                                   static_cast<double>(t.balanced_total);
  auto line = [&out](const std::string& label, const std::string& value) {
    out << std::left << std::setw(40) << label << std::right << value << "\n";
  };
  std::ostringstream r3, imb;
  r3 << std::fixed << std::setprecision(3) << ratio << "x";
  imb << std::fixed << std::setprecision(3) << t.imbalance();
  line("all pairs:", std::to_string(total));
  line("ring total (sum of slowest per step):", std::to_string(t.ring_total));
  line("balanced total (all pairs / " + std::to_string(n) + "):", std::to_string(t.balanced_total));
  line("ratio to balanced:", r3.str());
  line("imbalance (max / mean pairs per GPU):", imb.str());
}

nlohmann::json to_json(const Partition& p, const Documents& docs, const RingTable& t,
                       int64_t stripe_width, const Options& o) {
  using nlohmann::json;
  const int64_t total = schedule::total_pairs(docs);  // throws if it overflows int64
  json j;
  j["seq_len"] = p.seq_len;
  j["cp"] = p.ranks;
  j["layout"] = layout_name(p.layout);
  j["mask"] = o.mask;
  j["window"] = docs.window;
  j["document_sharding"] = o.sharding;
  j["stripe_width"] = p.layout == Layout::Striped ? stripe_width : 1;
  json d;
  d["count"] = std::max<size_t>(1, docs.starts.size());
  d["source"] = !o.docs.empty() ? "lengths" : !o.doc_mean.empty() ? "random" : "single";
  if (!o.doc_mean.empty()) {
    d["distribution"] = o.doc_dist;
    d["mean_tokens"] = parse_token_count(o.doc_mean, "--doc-mean");
    d["seed"] = o.seed;
  }
  if (docs.starts.size() <= 10000) d["starts"] = docs.starts;
  j["documents"] = d;
  j["per_rank"] = t.per_rank;
  j["per_step"] = t.per_step;
  j["slowest_per_step"] = t.slowest_per_step;
  j["total_pairs"] = total;
  j["ring_total"] = t.ring_total;
  j["balanced_total"] = t.balanced_total;
  j["ratio_to_balanced"] = t.balanced_total == 0 ? 1.0
                                                 : static_cast<double>(t.ring_total) /
                                                       static_cast<double>(t.balanced_total);
  j["imbalance"] = t.imbalance();
  json chunks = json::array();
  for (const auto& runs : p.chunks) {
    json rank = json::array();
    for (const auto& r : runs)
      rank.push_back(
          {{"begin", r.begin}, {"length", r.length}, {"stride", r.stride}, {"count", r.count}});
    chunks.push_back(rank);
  }
  j["chunks"] = chunks;
  return j;
}

constexpr int kMaxPartitionCp = 1024;
/// Chunks `--document-sharding per-document` lists at most (a table row each).
constexpr long long kMaxDocumentChunks = 1 << 20;

int run_partition(const Options& o) {
  Partition p;
  Documents docs;
  int64_t stripe_width = 1;
  try {
    const int64_t seq = parse_token_count(o.seq, "--seq");
    if (o.cp < 1)
      throw std::invalid_argument("--cp: must be at least 1 (got " + std::to_string(o.cp) + ")");
    // The ring table has cp x cp cells (and the report prints them): 1,024 ranks is a 1 M-cell
    // table, beyond any CP degree published (Llama 3 uses 16).
    if (o.cp > kMaxPartitionCp)
      throw std::invalid_argument("--cp: at most " + std::to_string(kMaxPartitionCp) + " (got " +
                                  std::to_string(o.cp) + "); the ring table has cp x cp cells");
    support::check_outputs({{"--json", o.json}});
    const Layout layout = parse_layout(o.layout);
    stripe_width = parse_token_count(o.stripe_width, "--stripe-width");
    if (layout != Layout::Striped && o.stripe_width != "1")
      throw std::invalid_argument("--stripe-width applies only to --layout striped");
    docs = make_documents(o, seq);
    if (o.mask == "full") {
      docs.mask = scenario::AttentionMask::Full;
    } else if (o.mask == "sliding-window") {
      docs.mask = scenario::AttentionMask::SlidingWindow;
      if (o.window.empty()) throw std::invalid_argument("--mask sliding-window needs --window (tokens, e.g. 4K)");
      docs.window = parse_token_count(o.window, "--window");
    } else if (o.mask != "causal") {
      throw std::invalid_argument("--mask: '" + o.mask + "' is not one of: causal, full, sliding-window");
    }
    if (!o.window.empty() && docs.mask != scenario::AttentionMask::SlidingWindow)
      throw std::invalid_argument("--window applies only to --mask sliding-window");
    if (o.sharding != "whole-sequence" && o.sharding != "per-document")
      throw std::invalid_argument("--document-sharding: '" + o.sharding +
                                  "' is not one of: per-document, whole-sequence");
    if (o.sharding == "per-document" && layout != Layout::ZigZag)
      throw std::invalid_argument("--document-sharding per-document applies only to --layout zigzag");
    // Per-document sharding cuts every document into 2 x cp chunks and lists them: bounded
    // before the work (1M one-token documents at cp 8 are 16.8 M chunks).
    if (o.sharding == "per-document") {
      const double chunks = 2.0 * o.cp * static_cast<double>(std::max<size_t>(1, docs.starts.size()));
      if (chunks > kMaxDocumentChunks)
        throw std::invalid_argument("--document-sharding per-document: " +
                                    std::to_string(std::max<size_t>(1, docs.starts.size())) +
                                    " documents x 2 x cp " + std::to_string(o.cp) + " = " +
                                    std::to_string(static_cast<long long>(chunks)) +
                                    " chunks, above the " + std::to_string(kMaxDocumentChunks) +
                                    " it lists; use fewer, longer documents or --document-sharding whole-sequence");
    }
    p = o.sharding == "per-document" ? schedule::make_document_partition(docs, o.cp)
                                     : schedule::make_partition(seq, o.cp, layout, stripe_width);
  } catch (const std::exception& e) {  // bad input: message and exit code 2
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  std::ostringstream report;
  nlohmann::json j;
  try {  // count everything first, so an overflow prints nothing but the error
    const RingTable t = schedule::ring_table(p, docs);
    print_report(report, p, docs, t, stripe_width);
    if (!o.json.empty()) j = to_json(p, docs, t, stripe_width, o);
  } catch (const std::overflow_error& e) {
    std::cerr << "error: " << e.what() << " (sequence too long to count exactly)\n";
    return 2;
  }
  std::cout << report.str();
  if (!o.json.empty()) {
    report::write_atomic(o.json, j.dump(2) + "\n");
  }
  return 0;
}

}  // namespace

void register_partition(CLI::App& app, int& rc) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "partition",
      "Causal (i, j) pair counts per GPU and per ring step for a context-parallel layout");
  sub->add_option("--seq", opts->seq, "sequence length in tokens (16, 4K, 1M)")->required();
  sub->add_option("--cp", opts->cp, "context-parallel degree N (GPUs in the ring)")->required();
  sub->add_option("--layout", opts->layout, "contiguous | zigzag | striped")->required();
  sub->add_option("--stripe-width", opts->stripe_width, "striped: tokens per stripe (default 1)");
  CLI::Option* docs = sub->add_option("--docs", opts->docs,
                                      "packed document lengths summing to --seq, e.g. 4K,4K,8K");
  CLI::Option* mean =
      sub->add_option("--doc-mean", opts->doc_mean, "random documents with this mean length");
  docs->excludes(mean);
  sub->add_option("--doc-dist", opts->doc_dist, "uniform | lognormal (default lognormal)")
      ->needs(mean);
  sub->add_option("--seed", opts->seed, "seed of the random documents (default 1)")
      ->needs(mean)
      ->check(whole_number(0, INT64_MAX));
  sub->add_option("--mask", opts->mask, "causal | full | sliding-window (default causal)");
  sub->add_option("--window", opts->window, "sliding-window mask: window in tokens (4K)");
  sub->add_option("--document-sharding", opts->sharding,
                  "zigzag with documents: whole-sequence (default) | per-document (TE THD: each "
                  "document in 2 cp chunks)");
  sub->add_option("--json", opts->json, "also write the counts as JSON to FILE");
  sub->callback([opts, &rc] { rc = run_partition(*opts); });
}

}  // namespace cpsim::app
