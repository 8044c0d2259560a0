#pragma once
/// engine::replay() in a child process that sends the Trace back, so SimGrid's one
/// Engine per process never binds the caller (what-if and samples runs, `collective`, tests).
#include <string>

#include "engine/replay.hpp"

namespace cpsim::app {

/// Throws std::runtime_error carrying the child's error message if the replay fails there, or
/// the signal that killed it.
schedule::Trace replay_in_child(const schedule::TaskGraph& g, const model::Topology& topo,
                                scenario::EngineKind kind, const engine::ReplayOptions& opt = {});

/// A Trace as the bytes a child sends back, and back again.
std::string encode_trace(const schedule::Trace& t);
schedule::Trace decode_trace(const std::string& bytes);

}  // namespace cpsim::app
