#pragma once
/// Unions and differences of time intervals: what "compute", "communication" and "exposed"
/// mean on one rank's timeline.
#include <utility>
#include <vector>

namespace cpsim::report {

using Intervals = std::vector<std::pair<double, double>>;

/// Sorted, overlapping and touching intervals joined, empty ones dropped.
Intervals merged(Intervals v);
/// Total length of merged intervals.
double measure(const Intervals& v);
/// |a \ b| for merged interval lists.
double measure_minus(const Intervals& a, const Intervals& b);
/// merged(a u b).
Intervals unite(const Intervals& a, const Intervals& b);

}  // namespace cpsim::report
