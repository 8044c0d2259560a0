#pragma once
/// The SimGrid engine's own timers (simgrid.cpp): what each queued event is, in 16 B.
///
/// They wait in one queue ordered as the analytic engine's (time, then op; event_queue.hpp),
/// behind one SimGrid timer at the earliest live one. SimGrid 3.32 keeps timers in a Fibonacci
/// heap of heap-allocated callbacks; one per kernel end (16.9 M, 7.5 M more moved by
/// interference, on the 70B full replay) spent ~20 % of the run in its consolidation,
/// allocation and removal. Stale entries (a kernel moved since, a solo transfer that became a
/// Comm) are skipped, never woken for.
#include <cstdint>

#include "schedule/task_graph.hpp"

namespace cpsim::engine::detail {

enum class SgEv : uint8_t { Kernel, Plain, Launch, Solo, Pipeline };

/// 16 B (the queue moves each ~3 times): a kernel's or a solo transfer's end is live while it
/// is still that op's current end (GpuKernels, RouteBundles), so no version is kept.
struct SgEvent {
  double t;
  schedule::OpId op;  ///< its op (a pipeline: its first member)
  uint32_t meta;      ///< kind << kKindShift | aux (Kernel: its GPU; Pipeline: its index)
  static constexpr int kKindShift = 29;
  SgEv kind() const { return static_cast<SgEv>(meta >> kKindShift); }
  uint32_t aux() const { return meta & ((uint32_t{1} << kKindShift) - 1); }
  static SgEvent make(double t, schedule::OpId op, SgEv kind, uint32_t aux = 0) {
    return {t, op, static_cast<uint32_t>(kind) << kKindShift | aux};
  }
};
static_assert(sizeof(SgEvent) == 16);

}  // namespace cpsim::engine::detail
