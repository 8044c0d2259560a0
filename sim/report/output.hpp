#pragma once
/// Result formats: JSON (the contract in docs/design.md), the terminal summary, Chrome trace events
/// for Perfetto, and an atomic file writer (temp file + rename) for all of them.
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include "report/metrics.hpp"

namespace cpsim::report {

/// The fully resolved scenario echoed back (every default filled in).
nlohmann::json scenario_json(const scenario::Scenario& sc);

nlohmann::json result_json(const Result& r, const scenario::Scenario& sc);

/// The summary's "kernel costs from" text: per op kind, each source that priced it with its
/// share of the kind's nominal kernel time, largest first, e.g. "attention: published
/// (h100-cudnn-published.csv) 92 %, derived (...) 8 %; gemm: ...". Kinds are separated by "; ".
std::string pricing_shares(const std::map<std::string, std::map<std::string, double>>& time_s);

/// The table a newcomer reads.
std::string summary_table(const Result& r, const scenario::Scenario& sc);

struct TraceFilter {
  std::vector<int> ranks;    ///< empty = all
  std::vector<int> layers;   ///< empty = all (ops without a layer are always kept)
};
/// Chrome trace-event JSON: a process per GPU, a thread per stream, an "X" event per op with
/// its label and arguments (ops on `critical_path`, report::Result's, marked), flow arrows
/// from each send to its receive. Written event by event: memory stays bounded by one event
/// whatever the trace's size.
void write_chrome_trace(std::ostream& out, const schedule::TaskGraph& g, const schedule::Trace& tr,
                        const std::vector<schedule::OpId>& critical_path,
                        const TraceFilter& filter = {});

/// Writes `text` to `path` atomically: a reader sees the old file or the whole new one.
/// Throws std::runtime_error naming the path on failure.
void write_atomic(const std::string& path, const std::string& text);
/// The same, with the content written by `write` (for outputs too large to hold in memory).
void write_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace cpsim::report
