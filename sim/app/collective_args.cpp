// `cpsim collective`'s options and their checks (nccl-tests' flags; the size limits of collective_args.hpp).
#include "app/collective_args.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "app/cli_checks.hpp"

namespace cpsim::app {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// nccl-tests' -d types and their sizes in bytes.
double type_size(const std::string& t) {
  const std::string l = lower(t);
  if (l == "int8" || l == "uint8" || l == "char" || l == "fp8" || l == "f8e4m3" || l == "f8e5m2")
    return 1;
  if (l == "half" || l == "float16" || l == "bfloat16" || l == "bf16") return 2;
  if (l == "int32" || l == "uint32" || l == "int" || l == "float" || l == "float32") return 4;
  if (l == "int64" || l == "uint64" || l == "double" || l == "float64") return 8;
  throw UsageError("-d/--datatype: '" + t +
                   "' is not one of: int8, uint8, half, bfloat16, int32, uint32, float, int64, "
                   "uint64, double, fp8");
}

}  // namespace

double parse_size(const std::string& text, const std::string& flag) {
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
    throw UsageError(flag + ": '" + text + "' is not a positive size (examples: 4096, 1K, 8G)");
  const double bytes = std::round(v * scale);
  if (bytes < 1)
    throw UsageError(flag + ": '" + text + "' is less than one byte");
  if (!(bytes <= kMaxSizeBytes))
    throw UsageError(flag + ": '" + text + "' is above the largest size, 1T (1 TiB: more than " +
                     "any GPU holds, and beyond it the engines' clocks lose precision)");
  return bytes;
}

std::vector<double> parse_sizes(const std::string& s) {
  std::vector<double> out;
  if (auto dots = s.find(".."); dots != std::string::npos) {
    const double lo = parse_size(s.substr(0, dots), "--sizes"),
                 hi = parse_size(s.substr(dots + 2), "--sizes");
    if (hi < lo) throw UsageError("--sizes: '" + s + "' ends below where it starts");
    for (double x = lo; x <= hi; x *= 2) out.push_back(x);
  } else {
    size_t at = 0;
    while (at <= s.size()) {
      const size_t comma = std::min(s.find(',', at), s.size());
      out.push_back(parse_size(s.substr(at, comma - at), "--sizes"));
      at = comma + 1;
    }
  }
  if (out.size() > kMaxSizes)
    throw UsageError("--sizes: '" + s + "' gives " + std::to_string(out.size()) +
                     " sizes; at most " + std::to_string(kMaxSizes));
  return out;
}

void add_collective_options(CLI::App& sub, CollArgs& a) {
  sub.add_option("--platform", a.platform, "platform preset name or YAML file")->required();
  sub.add_option("--param", a.params, "preset parameter KEY=VALUE (e.g. nodes=2), repeatable");
  sub.add_option("--op", a.op_name,
                 "allreduce | allgather | reducescatter | alltoall | broadcast | reduce | sendrecv")
      ->required();
  // 65,536 ranks: 4x the largest bundled fleet (16,384 GPUs), where one analytic size still
  // prices in seconds; past it the table would run for minutes per size.
  sub.add_option("--ranks", a.ranks, "ranks, GPUs 0..N-1 (default: all GPUs)")->check(whole_number(1, 65536));
  sub.add_option("--sizes", a.sizes, "A..B doubles from A to B, or a comma list; K = 1024");
  sub.add_option("-b,--minbytes", a.minbytes, "smallest size (nccl-tests -b; default 1K)");
  sub.add_option("-e,--maxbytes", a.maxbytes, "largest size (nccl-tests -e; default 8G)");
  sub.add_option("-f,--stepfactor", a.stepfactor, "multiply the size by this (default 2)");
  sub.add_option("-o,--redop", a.redop, "reduction: sum | prod | min | max | avg (nccl-tests -o)");
  sub.add_option("-d,--datatype", a.datatype, "element type: float (default), half, bfloat16, ...");
  sub.add_option("-n,--iters", a.iters, "iterations (nccl-tests -n; all take the same time here)");
  sub.add_option("--engine", a.engine, "simgrid | analytic (default simgrid)");
  sub.add_option("--proto,--protocol", a.protocol_name, "auto | ll | ll128 | simple (NCCL_PROTO)");
  sub.add_option("--algo", a.algo_name, "auto | ring | tree | nvls | nvlstree (NCCL_ALGO)");
  sub.add_option("--channels", a.channels, "channels (NCCL_MIN/MAX_NCHANNELS; default: NCCL's)");
  sub.add_option("--collectives", a.collectives,
                 "auto | steps | pipelined: ring steps as transfers, or one pipelined transfer "
                 "per rank and lane (auto: pipelined above 512 ranks, an all-to-all above 128)");
  sub.add_option("--json", a.json, "write {\"results\": [...]} with one object per size");
}

void finish_args(CollArgs& a) {
  using schedule::Algorithm;
  using schedule::CollOp;
  using schedule::Protocol;
  const std::string op = lower(a.op_name);
  if (op == "allreduce") a.op = CollOp::AllReduce;
  else if (op == "allgather") a.op = CollOp::AllGather;
  else if (op == "reducescatter") a.op = CollOp::ReduceScatter;
  else if (op == "alltoall") a.op = CollOp::AllToAll;
  else if (op == "broadcast") a.op = CollOp::Broadcast;
  else if (op == "reduce") a.op = CollOp::Reduce;
  else if (op == "sendrecv") a.sendrecv = true;
  else
    throw UsageError("--op: '" + a.op_name +
                     "' is not one of: allreduce, allgather, reducescatter, alltoall, broadcast, "
                     "reduce, sendrecv");
  const std::string p = lower(a.protocol_name);
  if (p == "auto") a.protocol = Protocol::Auto;
  else if (p == "ll") a.protocol = Protocol::LL;
  else if (p == "ll128") a.protocol = Protocol::LL128;
  else if (p == "simple") a.protocol = Protocol::Simple;
  else throw UsageError("--proto: '" + a.protocol_name + "' is not one of: auto, ll, ll128, simple");
  const std::string al = lower(a.algo_name);
  if (al == "auto") a.algorithm = Algorithm::Auto;
  else if (al == "ring") a.algorithm = Algorithm::Ring;
  else if (al == "tree") a.algorithm = Algorithm::Tree;
  else if (al == "nvls") a.algorithm = Algorithm::NVLS;
  else if (al == "nvlstree" || al == "nvls_tree") a.algorithm = Algorithm::NVLSTree;
  else throw UsageError("--algo: '" + a.algo_name + "' is not one of: auto, ring, tree, nvls, nvlstree");
  if (a.engine == "simgrid") a.engine_kind = scenario::EngineKind::SimGrid;
  else if (a.engine == "analytic") a.engine_kind = scenario::EngineKind::Analytic;
  else throw UsageError("--engine: '" + a.engine + "' is not one of: simgrid, analytic");
  if (a.collectives != "auto" && a.collectives != "steps" && a.collectives != "pipelined")
    throw UsageError("--collectives: '" + a.collectives + "' is not one of: auto, steps, pipelined");
  if (a.channels < 0 || a.channels > 64)
    throw UsageError("--channels: " + std::to_string(a.channels) + " is outside 0..64 (0 = NCCL's)");
  if (a.iters < 1 || a.iters > 1000000)
    throw UsageError("-n/--iters: " + std::to_string(a.iters) + " is outside 1..1000000");
  const std::string r = lower(a.redop);
  if (r != "sum" && r != "prod" && r != "min" && r != "max" && r != "avg")
    throw UsageError("-o/--redop: '" + a.redop + "' is not one of: sum, prod, min, max, avg");
  a.redop = r;
  type_size(a.datatype);
  const bool flags = !a.minbytes.empty() || !a.maxbytes.empty() || a.stepfactor != 0;
  if (!a.sizes.empty() && flags)
    throw UsageError("--sizes and -b/-e/-f both given; use one or the other");
  if (!a.sizes.empty()) {
    a.size_list = parse_sizes(a.sizes);
    return;
  }
  const double lo = parse_size(a.minbytes.empty() ? "1K" : a.minbytes, "-b/--minbytes");
  const double hi = parse_size(a.maxbytes.empty() ? (a.minbytes.empty() ? "8G" : a.minbytes)
                                                  : a.maxbytes,
                               "-e/--maxbytes");
  if (hi < lo) throw UsageError("-e/--maxbytes is below -b/--minbytes");
  const double f = a.stepfactor == 0 ? 2 : a.stepfactor;
  if (!(f > 1) || !std::isfinite(f))
    throw UsageError("-f/--stepfactor: " + std::to_string(a.stepfactor) + " must be above 1");
  for (double x = lo; x <= hi * (1 + 1e-12); x *= f) {
    a.size_list.push_back(std::round(x));
    if (a.size_list.size() > kMaxSizes)
      throw UsageError("-b/-e/-f give more than " + std::to_string(kMaxSizes) + " sizes");
  }
}

Factors op_factors(const CollArgs& a, int n) {
  using schedule::CollOp;
  Factors f;
  f.type_bytes = type_size(a.datatype);
  if (a.sendrecv) {
    f.redop = "none";
    return f;
  }
  switch (a.op) {
    case CollOp::AllReduce:
      f.busbw = 2.0 * (n - 1) / n;
      f.redop = a.redop;
      break;
    case CollOp::AllGather:
    case CollOp::AllToAll:
      f.busbw = double(n - 1) / n;
      f.count_div = n;
      f.redop = "none";
      break;
    case CollOp::ReduceScatter:
      f.busbw = double(n - 1) / n;
      f.count_div = n;
      f.redop = a.redop;
      break;
    case CollOp::Broadcast:
      f.redop = "none";
      f.root = 0;
      break;
    case CollOp::Reduce:
      f.redop = a.redop;
      f.root = 0;
      break;
  }
  return f;
}

}  // namespace cpsim::app
