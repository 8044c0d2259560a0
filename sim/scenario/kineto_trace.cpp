// Kineto Chrome traces -> the GPU kernels of one rank.
#include "scenario/kineto_trace.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scenario/load.hpp"

namespace cpsim::scenario {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw InputError(file + ": error: " + what, file, 0, 0, "", what);
}

double number(const nlohmann::json& e, const char* key) {
  const auto it = e.find(key);
  if (it == e.end()) return -1;
  if (it->is_number()) return it->get<double>();
  if (it->is_string()) {  // some exporters write "ts" as a string of digits
    try {
      return std::stod(it->get<std::string>());
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

}  // namespace

KinetoRank read_kineto_trace(const std::string& path, int default_rank) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) fail(path, "no such regular file");
  if (fs::file_size(path, ec) > (512ull << 20)) fail(path, "larger than 512 MiB");
  std::ifstream in(path, std::ios::binary);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, std::string("not JSON (") + e.what() + ")");
  }
  KinetoRank r;
  r.file = path;
  r.rank = default_rank;
  const nlohmann::json* events = nullptr;
  if (doc.is_object()) {
    if (auto it = doc.find("traceEvents"); it != doc.end() && it->is_array()) events = &*it;
    if (auto it = doc.find("distributedInfo"); it != doc.end() && it->is_object())
      if (auto rk = it->find("rank"); rk != it->end() && rk->is_number_integer()) r.rank = rk->get<int>();
  } else if (doc.is_array()) {
    events = &doc;  // the Chrome trace format also allows a bare array of events
  }
  if (events == nullptr) fail(path, "not a Chrome trace: expected an object with a \"traceEvents\" array");
  for (const auto& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", "");
    const double ts = number(e, "ts"), dur = number(e, "dur");
    if (ts < 0 || dur < 0) continue;
    if (cat == "user_annotation" && e.value("name", "").rfind("ProfilerStep#", 0) == 0) {
      r.steps.emplace_back(ts, ts + dur);
      continue;
    }
    if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
    TraceKernel k;
    k.name = e.value("name", "");
    k.start_us = ts;
    k.dur_us = dur;
    if (auto a = e.find("args"); a != e.end() && a->is_object())
      if (auto s = a->find("stream"); s != a->end() && s->is_number_integer()) k.stream = s->get<int>();
    r.kernels.push_back(std::move(k));
  }
  if (r.kernels.empty())
    fail(path, "no GPU kernel (events with \"cat\": \"kernel\"): was the profiler run with "
               "ProfilerActivity.CUDA?");
  std::sort(r.kernels.begin(), r.kernels.end(),
            [](const TraceKernel& a, const TraceKernel& b) { return a.start_us < b.start_us; });
  std::sort(r.steps.begin(), r.steps.end());
  return r;
}

}  // namespace cpsim::scenario
