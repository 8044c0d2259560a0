// `cpsim collective`: one NCCL-like collective per message size, simulated on a platform and
// printed like nccl-tests, so users can hold it against their own nccl-tests runs.
//
// Each size is its own replay. With SimGrid each runs in a forked child (one Engine per
// process): the sizes stay independent, exactly as nccl-tests times them one after another,
// and each child's memory is returned when it exits. The fork costs about a millisecond.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "engine/replay.hpp"
#include "scenario/load.hpp"
#include "schedule/collectives.hpp"

namespace cpsim::app {

namespace {

using schedule::CollOp;
using schedule::Protocol;

struct Options {
  std::string platform;
  std::vector<std::string> params;
  std::string op;
  int ranks = 0;  ///< 0 = every GPU of the platform
  std::string sizes = "1K..8G";
  std::string engine = "simgrid";
  std::string protocol = "auto";
};

/// Bad command-line input: printed as is, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

CollOp parse_op(const std::string& s) {
  if (s == "allreduce") return CollOp::AllReduce;
  if (s == "allgather") return CollOp::AllGather;
  if (s == "reducescatter") return CollOp::ReduceScatter;
  if (s == "alltoall") return CollOp::AllToAll;
  if (s == "broadcast") return CollOp::Broadcast;
  throw UsageError("--op: '" + s +
                   "' is not one of: allreduce, allgather, reducescatter, alltoall, broadcast");
}

Protocol parse_protocol(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "auto") return Protocol::Auto;
  if (l == "ll") return Protocol::LL;
  if (l == "ll128") return Protocol::LL128;
  if (l == "simple") return Protocol::Simple;
  throw UsageError("--protocol: '" + s + "' is not one of: auto, ll, ll128, simple");
}

/// "4096", "1K", "8G", "64KiB", "1MB": bytes, K = 1024 as in nccl-tests' -b / -e.
double parse_size(const std::string& text) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  std::string suffix;
  while (!t.empty() && std::isalpha(static_cast<unsigned char>(t.back()))) {
    suffix.insert(suffix.begin(),
                  static_cast<char>(std::toupper(static_cast<unsigned char>(t.back()))));
    t.pop_back();
  }
  if (suffix.size() >= 2 && suffix.back() == 'B') suffix.pop_back();  // KB, KIB -> K, KI
  if (suffix.size() == 2 && suffix.back() == 'I') suffix.pop_back();  // KI -> K
  double scale = 1;
  if (suffix == "K")
    scale = 1024.0;
  else if (suffix == "M")
    scale = 1024.0 * 1024;
  else if (suffix == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B")
    t.clear();
  size_t used = 0;
  double v = -1;
  try {
    if (!t.empty() && (std::isdigit(static_cast<unsigned char>(t[0])) || t[0] == '.'))
      v = std::stod(t, &used);
  } catch (const std::exception&) {
    v = -1;
  }
  if (v <= 0 || used != t.size() || !std::isfinite(v))
    throw UsageError("--sizes: '" + text + "' is not a positive size (examples: 4096, 1K, 8G)");
  return std::round(v * scale);
}

/// "A..B" doubles from A up to B; "A,B,C" lists sizes.
std::vector<double> parse_sizes(const std::string& s) {
  std::vector<double> out;
  if (auto dots = s.find(".."); dots != std::string::npos) {
    const double lo = parse_size(s.substr(0, dots)), hi = parse_size(s.substr(dots + 2));
    if (hi < lo) throw UsageError("--sizes: '" + s + "' ends below where it starts");
    for (double x = lo; x <= hi; x *= 2) out.push_back(x);
    return out;
  }
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(parse_size(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}

int run_collective(const Options& o) {
  try {
    const CollOp op = parse_op(o.op);
    const Protocol protocol = parse_protocol(o.protocol);
    scenario::EngineKind kind;
    if (o.engine == "simgrid")
      kind = scenario::EngineKind::SimGrid;
    else if (o.engine == "analytic")
      kind = scenario::EngineKind::Analytic;
    else
      throw UsageError("--engine: '" + o.engine + "' is not one of: simgrid, analytic");
    const std::vector<double> sizes = parse_sizes(o.sizes);

    const scenario::PlatformSpec spec = scenario::load_platform(o.platform, o.params);
    const model::Topology topo(spec);
    const int n = o.ranks == 0 ? topo.gpus() : o.ranks;
    if (n < 1) throw UsageError("--ranks: must be at least 1");
    if (n > topo.gpus())
      throw UsageError("--ranks " + std::to_string(n) + " exceeds the " +
                       std::to_string(topo.gpus()) + " GPUs of platform " + spec.name);

    // nccl-tests: busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
    // reduce-scatter and all-to-all, 1 for broadcast; count in 4-byte floats, per rank for
    // the collectives whose size is the total of n per-rank buffers.
    const double busbw_factor = op == CollOp::AllReduce   ? 2.0 * (n - 1) / n
                                : op == CollOp::Broadcast ? 1.0
                                                          : double(n - 1) / n;
    const bool per_rank_count = op != CollOp::AllReduce && op != CollOp::Broadcast;

    std::printf("# cpsim collective: %s, %d ranks on %s (%d GPUs), engine %s, protocol %s\n",
                schedule::coll_op_name(op), n, spec.name.c_str(), topo.gpus(), o.engine.c_str(),
                schedule::protocol_name(protocol));
    std::printf("# busbw = algbw x %.4g (nccl-tests); GB/s = 1e9 bytes/s\n#\n", busbw_factor);
    std::printf("# %12s %12s %12s %12s %12s  %s\n", "size(B)", "count", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "protocol");
    std::fflush(stdout);
    for (double bytes : sizes) {
      schedule::TaskGraph g;
      schedule::CollectiveRequest req;
      req.op = op;
      for (int i = 0; i < n; ++i) req.ranks.push_back(i);
      req.bytes = bytes;
      req.protocol = protocol;
      const auto res = schedule::add_collective(g, topo, req);
      g.finalize();
      const engine::Trace tr = kind == scenario::EngineKind::SimGrid
                                   ? engine::replay_in_child(g, topo, kind)
                                   : engine::replay_analytic(g, topo);
      const double t = tr.makespan_s;
      const double algbw = t > 0 ? bytes / t / 1e9 : 0;
      const double count = std::floor(bytes / 4 / (per_rank_count ? n : 1));
      std::printf("  %12.0f %12.0f %12.2f %12.2f %12.2f  %s\n", bytes, count, t * 1e6, algbw,
                  algbw * busbw_factor, n > 1 ? schedule::protocol_name(res.protocol) : "-");
      std::fflush(stdout);
    }
    return 0;
  } catch (const UsageError& e) {
    std::cerr << "cpsim collective: error: " << e.what() << "\n";
    return 2;
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {  // platform that cannot be built
    std::cerr << "cpsim collective: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cpsim collective: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

void register_collective(CLI::App& app, int& rc) {
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "collective", "nccl-tests-style table of one collective simulated on a platform");
  sub->add_option("--platform", opts->platform, "platform preset name or YAML file")->required();
  sub->add_option("--param", opts->params, "preset parameter KEY=VALUE (e.g. nodes=2), repeatable");
  sub->add_option("--op", opts->op, "allreduce | allgather | reducescatter | alltoall | broadcast")
      ->required();
  sub->add_option("--ranks", opts->ranks, "ranks in the ring, GPUs 0..N-1 (default: all GPUs)");
  sub->add_option("--sizes", opts->sizes,
                  "A..B doubles from A to B, or a comma list; K = 1024 (default 1K..8G)");
  sub->add_option("--engine", opts->engine, "simgrid | analytic (default simgrid)");
  sub->add_option("--protocol", opts->protocol, "auto | ll | ll128 | simple (default auto)");
  sub->callback([opts, &rc] { rc = run_collective(*opts); });
}

}  // namespace cpsim::app
