#pragma once
/// Unions and differences of time intervals: what "compute", "communication" and "exposed"
/// mean on one rank's timeline.
#include <utility>
#include <vector>

namespace cpsim::report {

using Intervals = std::vector<std::pair<double, double>>;

/// Sorted, overlapping and touching intervals joined, empty ones dropped.
Intervals merged(Intervals v);
/// Appends [s, e) to `v`, which is merged in place whenever it would grow its buffer past a
/// few thousand: merged(v) is then the same, and a rank's list stays as long as its merged
/// timeline instead of one entry per op (24 M ops of the 70B full replay: ~0.5 GB).
void add_interval(Intervals& v, double s, double e);
/// Total length of merged intervals.
double measure(const Intervals& v);
/// |a \ b| for merged interval lists.
double measure_minus(const Intervals& a, const Intervals& b);
/// merged(a u b).
Intervals unite(const Intervals& a, const Intervals& b);

}  // namespace cpsim::report
