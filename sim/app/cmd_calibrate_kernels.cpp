// `cpsim calibrate kernels FILE... --platform P [-o PROFILE.csv]`: attention kernel timings from
// kernels/measure.sh (a profile CSV), FlashAttention's benchmarks/benchmark_flash_attention.py
// output, or a plain CSV, turned into a profile the cost model reads (`cost.profile: FILE`), each
// row naming the file and line it came from; and how the cost model's prices differ from them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>

#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "model/cost_model.hpp"
#include "model/fp8_attention.hpp"
#include "report/output.hpp"
#include "support/safe_write.hpp"
#include "scenario/load.hpp"
#include "scenario/mask.hpp"
#include "scenario/profile_csv.hpp"

namespace cpsim::app {

namespace {

struct CalibKernelArgs {
  std::vector<std::string> files;
  std::string platform;
  std::string out;
  std::string gpu;
  int fa_dim = 2048;  // benchmark_flash_attention.py: nheads = dim // headdim with dim = 2048
};

/// One timed call, batch folded into the heads as the profile format does.
struct Timed {
  std::string kernel, direction, mask, from;
  int64_t q = 0, kv = 0;
  int heads_q = 0, heads_kv = 0, head_dim = 0;
  double frac = 1, time_s = 0;
};

[[noreturn]] void fail(const std::string& file, int line, const std::string& what) {
  const std::string where = line > 0 ? file + ":" + std::to_string(line) : file;
  throw scenario::InputError(where + ": error: " + what, file, line, 0, "", what);
}

double causal_fraction(double q, double kv) {
  // Queries aligned to the end of the keys (lower-right), as FlashAttention and SDPA do.
  double pairs = 0;
  if (q <= kv) pairs = q * kv - q * (q - 1) / 2;
  else pairs = kv * (kv + 1) / 2;
  return pairs / (q * kv);
}

double fwd_flops(const Timed& t) {
  return 4.0 * static_cast<double>(t.q) * static_cast<double>(t.kv) * t.frac * t.heads_q * t.head_dim;
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, 0, "no such regular file");
  if (std::filesystem::file_size(path, ec) > (16u << 20)) fail(path, 0, "larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// FlashAttention's benchmark script: "### causal=True, headdim=128, batch_size=16, seqlen=1024 ###"
/// then "<method> fwd: X TFLOPs/s, bwd: Y TFLOPs/s, fwd + bwd: Z TFLOPs/s" per method; its FLOPs
/// are 4 x batch x seqlen^2 x nheads x headdim (halved when causal), bwd 2.5x.
std::vector<Timed> read_fa_bench(const std::string& text, const std::string& file, int dim) {
  static const std::regex config(
      R"(###\s*causal=(True|False),\s*headdim=(\d+),\s*batch_size=(\d+),\s*seqlen=(\d+)\s*###)");
  static const std::regex speed(
      R"(^\s*(\S.*?)\s+fwd:\s*([0-9.]+)\s*TFLOPs/s,.*?bwd:\s*([0-9.]+)\s*TFLOPs/s)");
  std::vector<Timed> out;
  std::istringstream in(text);
  std::string l;
  int n = 0;
  bool have = false, causal = false;
  int d = 0, b = 0, s = 0;
  while (std::getline(in, l)) {
    ++n;
    std::smatch m;
    if (std::regex_search(l, m, config)) {
      causal = m[1] == "True";
      d = std::stoi(m[2]);
      b = std::stoi(m[3]);
      s = std::stoi(m[4]);
      if (d < 1 || b < 1 || s < 1 || dim % d) fail(file, n, "a configuration this benchmark cannot have");
      have = true;
      continue;
    }
    if (!have || !std::regex_search(l, m, speed)) continue;
    for (int dir = 0; dir < 2; ++dir) {
      const double tf = std::stod(m[dir == 0 ? 2 : 3]);
      if (!(tf > 0)) continue;  // FlashAttention prints 0 for a method that failed
      Timed t;
      t.kernel = m[1];
      std::replace(t.kernel.begin(), t.kernel.end(), ',', ' ');
      t.direction = dir == 0 ? "fwd" : "bwd";
      t.mask = causal ? "causal" : "full";
      t.q = t.kv = s;
      t.heads_q = t.heads_kv = b * (dim / d);
      t.head_dim = d;
      // FlashAttention's own accounting: causal halves the square exactly.
      t.frac = causal ? 0.5 : 1.0;
      t.time_s = fwd_flops(t) * (dir == 1 ? 2.5 : 1.0) / (tf * 1e12);
      t.frac = causal ? causal_fraction(s, s) : 1.0;
      t.from = file + ":" + std::to_string(n);
      out.push_back(t);
    }
  }
  if (out.empty()) fail(file, n, "no '### causal=..., headdim=..., batch_size=..., seqlen=... ###' "
                                 "block followed by '<method> fwd: X TFLOPs/s, bwd: Y TFLOPs/s'");
  return out;
}

/// A plain CSV: q_len,kv_len,mask,heads_q,heads_kv,head_dim,direction,time_us[,batch][,kernel].
std::vector<Timed> read_plain_csv(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  std::string l;
  int n = 0;
  std::vector<std::string> cols;
  std::vector<Timed> out;
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::string c;
    std::istringstream ss(s);
    while (std::getline(ss, c, ',')) {
      c.erase(0, c.find_first_not_of(" \t"));
      c.erase(c.find_last_not_of(" \t\r") + 1);
      v.push_back(c);
    }
    return v;
  };
  while (std::getline(in, l)) {
    ++n;
    if (l.empty() || l[0] == '#') continue;
    if (cols.empty()) {
      cols = split(l);
      for (const char* need : {"q_len", "kv_len", "mask", "heads_q", "head_dim", "direction", "time_us"})
        if (std::find(cols.begin(), cols.end(), need) == cols.end())
          fail(file, n, std::string("the header has no '") + need + "' column (expected q_len,kv_len,"
                        "mask,heads_q,heads_kv,head_dim,direction,time_us[,batch][,kernel])");
      continue;
    }
    const auto v = split(l);
    if (v.size() != cols.size())
      fail(file, n, std::to_string(v.size()) + " cells where the header has " + std::to_string(cols.size()));
    auto cell = [&](const char* k) -> std::string {
      const auto it = std::find(cols.begin(), cols.end(), k);
      return it == cols.end() ? "" : v[it - cols.begin()];
    };
    auto num = [&](const char* k, double lo) {
      const std::string c = cell(k);
      char* end = nullptr;
      const double x = std::strtod(c.c_str(), &end);
      if (c.empty() || end != c.c_str() + c.size() || !std::isfinite(x) || x < lo)
        fail(file, n, std::string("'") + k + "': expected a number >= " + std::to_string(int(lo)) +
                          ", got '" + c + "'");
      return x;
    };
    Timed t;
    t.q = static_cast<int64_t>(num("q_len", 1));
    t.kv = static_cast<int64_t>(num("kv_len", 1));
    t.mask = cell("mask");
    if (t.mask != "full" && t.mask != "causal") fail(file, n, "'mask': expected full or causal, got '" + t.mask + "'");
    const int batch = cell("batch").empty() ? 1 : static_cast<int>(num("batch", 1));
    t.heads_q = static_cast<int>(num("heads_q", 1)) * batch;
    t.heads_kv = (cell("heads_kv").empty() ? t.heads_q / batch : static_cast<int>(num("heads_kv", 1))) * batch;
    if (t.heads_q % t.heads_kv) fail(file, n, "heads_q must be a multiple of heads_kv");
    t.head_dim = static_cast<int>(num("head_dim", 1));
    t.direction = cell("direction");
    if (t.direction != "fwd" && t.direction != "bwd") fail(file, n, "'direction': expected fwd or bwd");
    t.time_s = num("time_us", 0) * 1e-6;
    if (!(t.time_s > 0)) fail(file, n, "'time_us' must be above 0");
    t.kernel = cell("kernel").empty() ? "measured" : cell("kernel");
    t.frac = t.mask == "causal" ? causal_fraction(double(t.q), double(t.kv)) : 1.0;
    t.from = file + ":" + std::to_string(n);
    out.push_back(t);
  }
  if (out.empty()) fail(file, n, "no rows");
  return out;
}

std::vector<Timed> read_any(const std::string& path, int fa_dim) {
  const std::string text = read_text(path);
  const std::string first = text.substr(0, text.find('\n'));
  if (first.rfind("gpu,kernel,direction", 0) == 0) {
    // kernels/measure.sh and the bundled profiles: read (and checked) as the cost model reads them.
    const auto table = scenario::read_profile_csv(path);
    std::vector<Timed> out;
    for (const auto& r : table.rows) {
      // FP8 rows set FP8 attention's ratio, not a BF16 price: this compares BF16 kernels.
      if (r.fwdbwd || r.dtype.rfind("fp8", 0) == 0) continue;
      Timed t;
      t.kernel = r.kernel;
      t.direction = r.backward ? "bwd" : "fwd";
      t.mask = scenario::mask_name(r.mask);
      t.q = r.q_len;
      t.kv = r.kv_len;
      t.heads_q = r.heads_q;
      t.heads_kv = r.heads_kv;
      t.head_dim = r.head_dim;
      t.frac = r.unmasked_fraction;
      t.time_s = r.time_s;
      t.from = path + ":" + std::to_string(r.line);
      out.push_back(t);
    }
    return out;
  }
  if (text.find("### causal=") != std::string::npos) return read_fa_bench(text, path, fa_dim);
  return read_plain_csv(text, path);
}

int run_calibrate_kernels(const CalibKernelArgs& a) {
  support::check_outputs({{"-o", a.out}}, {{"--platform", a.platform}});
  for (const auto& f : a.files) {
    std::error_code ec;
    if (!a.out.empty() && std::filesystem::equivalent(f, a.out, ec))
      throw std::invalid_argument("-o " + a.out + " is one of the inputs: it would be overwritten");
  }
  const scenario::PlatformSpec platform = scenario::load_platform(a.platform);
  std::vector<Timed> rows;
  for (const auto& f : a.files) {
    auto some = read_any(f, a.fa_dim);
    rows.insert(rows.end(), some.begin(), some.end());
  }
  const std::string gpu = a.gpu.empty() ? platform.gpu.name : a.gpu;
  scenario::CostSpec spec;  // profile auto: what a scenario on this platform prices with today
  const auto cost = model::CostModel::make(spec, platform.gpu);
  std::printf("# cpsim calibrate kernels: %zu timed calls against %s's cost model (%s)\n", rows.size(),
              platform.gpu.name.c_str(), cost->describe().c_str());
  std::printf("# %-28s %-4s %13s %-6s %9s %4s %11s %11s %7s  %s\n", "from", "dir", "q x kv", "mask",
              "heads", "d", "measured us", "model us", "err %", "priced by");
  std::vector<double> errs;
  std::string csv =
      "gpu,kernel,direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,"
      "time_us,tflops,source,commit\n";
  for (const auto& t : rows) {
    model::AttentionCall call;
    call.q_len = t.q;
    call.kv_len = t.kv;
    call.mask = t.mask == "full" ? scenario::Mask::Full : scenario::Mask::Causal;
    call.unmasked_fraction = t.frac;
    call.heads_q = t.heads_q;
    call.heads_kv = t.heads_kv;
    call.head_dim = t.head_dim;
    call.batch = 1;
    call.backward = t.direction == "bwd";
    const model::Cost c = model::attention_cost(*cost, call, false);
    const double err = c.time_s / t.time_s - 1;
    errs.push_back(std::abs(err));
    std::string from = t.from;
    if (from.size() > 28) from = "..." + from.substr(from.size() - 25);
    std::printf("  %-28s %-4s %6lldx%-6lld %-6s %4d/%-4d %4d %11.1f %11.1f %+7.1f  %s%s\n", from.c_str(),
                t.direction.c_str(), static_cast<long long>(t.q), static_cast<long long>(t.kv),
                t.mask.c_str(), t.heads_q, t.heads_kv, t.head_dim, t.time_s * 1e6, c.time_s * 1e6,
                100 * err, model::cost_source_name(c.source), c.extrapolated ? " (extrapolated)" : "");
    const double flops = fwd_flops(t) * (t.direction == "bwd" ? 2.5 : 1.0);
    std::string prov = t.from;
    for (char& ch : prov)
      if (ch == ',' || ch == '\n' || ch == '\r') ch = ';';
    char line[512];
    std::snprintf(line, sizeof line, "%s,%s,%s,%lld,%lld,%s,%.6f,%d,%d,%d,bf16,%.3f,%.2f,measured,%s\n",
                  gpu.c_str(), t.kernel.c_str(), t.direction.c_str(), static_cast<long long>(t.q),
                  static_cast<long long>(t.kv), t.mask.c_str(), t.frac, t.heads_q, t.heads_kv,
                  t.head_dim, t.time_s * 1e6, flops / t.time_s / 1e12, prov.c_str());
    csv += line;
  }
  std::sort(errs.begin(), errs.end());
  const auto within = std::count_if(errs.begin(), errs.end(), [](double e) { return e <= 0.10; });
  std::printf("# the cost model against these timings: median |error| %.1f %%, %lld of %zu within 10 %%\n",
              100 * errs[errs.size() / 2], static_cast<long long>(within), errs.size());
  if (!a.out.empty()) {
    report::write_atomic(a.out, csv);
    std::printf("# wrote %s: use it with `cost: {profile: %s}` in a scenario, or --profile %s with "
                "cpsim kernels price\n", a.out.c_str(), a.out.c_str(), a.out.c_str());
  } else {
    std::printf("# give -o FILE to write the profile\n");
  }
  return 0;
}

}  // namespace

void register_calibrate_kernels(CLI::App* calibrate, int& rc) {
  auto a = std::make_shared<CalibKernelArgs>();
  CLI::App* k = calibrate->add_subcommand(
      "kernels", "turn attention kernel timings (kernels/measure.sh, FlashAttention's benchmark, a "
                 "plain CSV) into a profile, and compare the cost model with them");
  k->add_option("files", a->files, "timing files")->required();
  k->add_option("--platform", a->platform, "the platform whose GPU ran them")->required();
  k->add_option("-o,--out", a->out, "write the profile CSV here");
  k->add_option("--gpu", a->gpu, "the profile's gpu column (default: the platform's GPU name)");
  k->add_option("--fa-dim", a->fa_dim, "FlashAttention benchmark's model width (heads = dim / headdim; 2048)");
  k->callback([a, &rc] {
    rc = report_errors("cpsim calibrate kernels", "", [&] { return run_calibrate_kernels(*a); });
  });
}

}  // namespace cpsim::app
