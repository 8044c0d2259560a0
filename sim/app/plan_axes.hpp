#pragma once
/// `cpsim plan`'s axes beyond the layout: TP communication overlap
/// (parallel.tp_comm_overlap, with the sequence parallelism Megatron requires for it), the
/// precision (bf16, or fp8 in each FP8 recipe the GPU runs) and the framework stack
/// (training.stack). An axis is searched only when the scenario does not write its key (one it
/// pins is the user's choice) and only with the values the loader accepts for the platform.
/// They change no layout's structure, so they are tried on the best layouts of the analytic
/// stage, one axis at a time from the scenario's value and then the best value of each
/// together: a bounded number of whole steps (at most 1 + sum of (values - 1) per layout).
#include <string>
#include <vector>

#include "app/plan_search.hpp"
#include "scenario/specs.hpp"

namespace cpsim::app::plan {

struct AxisValue {
  std::string label;              ///< as the table prints it: "on", "fp8-delayed", "torch-compile"
  std::vector<std::string> sets;  ///< the overrides that select it
};
struct Axis {
  std::string name;               ///< "tp_comm_overlap", "precision", "stack"
  std::vector<AxisValue> values;  ///< the scenario's own value first
};

/// The axes the scenario leaves free, with their values; `not_searched` gets one line per axis
/// it pins or cannot vary ("precision: the scenario sets training.precision").
std::vector<Axis> free_axes(const std::string& path, const std::vector<std::string>& sets,
                            const scenario::Scenario& given, std::vector<std::string>& not_searched);

/// " on fp8-delayed torch-compile": what a candidate's label gets for its axis values.
std::string axis_suffix(const std::vector<std::string>& values);

/// Tries the axes on the `keep` best of `ok` (indices into res.all, best first) and, when the
/// overlap is an axis and none of those has TP > 1, on the best layout with TP > 1; adds each
/// variant to res.all (ranked ones to `ok`, others with their status and why) and re-sorts
/// `ok` by throughput. Candidates' `sets` reproduce each variant with `cpsim run`.
void search_axes(const std::string& path, const std::vector<std::string>& sets, const Options& opt,
                 const std::vector<Axis>& axes, size_t keep, Result& res, std::vector<size_t>& ok);

}  // namespace cpsim::app::plan
