#pragma once
/// results.csv: one row per finished point (id, status, reason, swept values, metrics), written
/// and read back as RFC 4180 text.
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/sweep/common.hpp"

namespace cpsim::app::sweep {

/// The metrics every row carries, in column order: CSV name and JSON pointer in the result.
struct MetricColumn {
  const char* column;
  const char* pointer;
  double scale = 0;  ///< 0: the value as written; else a number times this (bytes -> GB)
};
constexpr MetricColumn kMetrics[] = {
    {"step_time_s", "/step_time_s"},
    {"tokens_per_s", "/tokens_per_s"},
    {"tflops_per_gpu", "/tflops_per_gpu"},
    {"mfu", "/mfu"},
    {"exposed_comm_s", "/breakdown/exposed_comm_s"},
    {"overlap_fraction", "/attention/overlap_fraction"},
    {"imbalance", "/attention/imbalance"},
    {"peak_bytes_per_rank", "/memory/peak_bytes_per_rank"},
    {"fits", "/memory/fits"},
    {"sim_wall_s", "/simulation/wall_s"},
    // What a planner reads first: the configuration in readable words and memory
    // in GB; then communication by kind from the result's `communication` section (empty
    // cells when the result has none, e.g. an older cpsim).
    {"scheme", "/scenario/parallel/attention/scheme"},
    {"layout", "/scenario/parallel/attention/layout"},
    // not "platform": that is also the name of a swept axis (sweeps/usp-degrees.yaml)
    {"platform_name", "/scenario/platform/name"},
    {"gpus", "/gpus"},
    {"peak_mem_gb", "/memory/peak_bytes_per_rank", 1e-9},
    {"tp_comm_s", "/communication/tp/total_s"},
    {"tp_exposed_s", "/communication/tp/exposed_s"},
    {"cp_comm_s", "/communication/cp/total_s"},
    {"cp_exposed_s", "/communication/cp/exposed_s"},
    {"pp_comm_s", "/communication/pp/total_s"},
    {"pp_exposed_s", "/communication/pp/exposed_s"},
    {"dp_comm_s", "/communication/dp/total_s"},
    {"dp_exposed_s", "/communication/dp/exposed_s"},
    {"ep_comm_s", "/communication/ep/total_s"},
    {"ep_exposed_s", "/communication/ep/exposed_s"},
};

/// One finished point as its CSV row: id, status, reason, swept values, metrics (as text, so a
/// resumed row is written back exactly as it was read).
struct Row {
  std::string id;
  std::string status;  ///< ok | failed | timeout | crashed
  std::string reason;
  std::map<std::string, std::string> cells;  ///< swept keys and metrics by column name
};

std::string csv_field(const std::string& s);
/// RFC 4180 records (quoted fields may hold commas, quotes and newlines).
std::vector<std::vector<std::string>> parse_csv(const std::string& text);
std::vector<std::string> csv_header(const std::vector<std::string>& swept);
std::string csv_text(const std::vector<std::string>& header, const std::vector<const Row*>& rows);
/// The rows of a results CSV (none if it does not exist), cells by column name.
std::vector<Row> read_rows(const std::string& csv_path);
/// Whether a row was written for this point with its current values: the sweep file may have
/// changed since.
bool same_values(const Row& row, const scenario::SweepPoint& p);
std::string point_json(const fs::path& dir, const scenario::SweepPoint& p);
std::string shard_csv_name(size_t i, size_t k);
std::string format_number(const nlohmann::json& v);
/// A point's result JSON, if the file is there and parses to an object.
std::optional<nlohmann::json> read_result_json(const std::string& path);
/// Whether `result` (a point's runs/ID.json) was produced by the scenario the point resolves to
/// now: its JSON echoes the whole resolved scenario, so an edit to the base file (or to a
/// platform or model file it names) since that run shows as a difference. What --resume and
/// --merge keep is checked by it, and their rows' metrics are read again from that JSON.
bool result_of_point(const scenario::SweepPoint& p, const nlohmann::json& result);
/// Sets the row's metric cells (kMetrics) from a result JSON; a key the result lacks is empty.
void fill_metrics(Row& row, const nlohmann::json& result);
/// The swept keys in first-seen order: the CSV's value columns.
std::vector<std::string> swept_keys(const std::vector<scenario::SweepPoint>& points);

}  // namespace cpsim::app::sweep
