#pragma once
/// cpsim's log: what the simulator decided — NCCL's choice for each collective, kernel calls
/// priced outside their profile and by which rule, shortcuts taken or refused — and the
/// warnings, on stderr in one format ("cpsim: info: ..."). The level comes from -v (info),
/// -vv (debug), --log-level or the environment variable CPSIM_LOG; the default, warn, prints
/// nothing on a successful run. Only log.cpp sees spdlog, so including this costs nothing.
#include <optional>
#include <string>
#include <string_view>

namespace cpsim::log {

enum class Level { Trace, Debug, Info, Warn, Error, Off };

/// "trace", "debug", "info", "warn" (or "warning"), "error", "off"; nullopt otherwise.
std::optional<Level> parse_level(std::string_view name);
/// The names parse_level accepts, for messages: "trace, debug, info, warn, error, off".
const char* level_names();

/// Sets the level, and exports it as CPSIM_LOG so that child processes (sweep points, samples,
/// plan workers) log at the same level.
void set_level(Level level);
Level level();
bool enabled(Level level);

void write(Level level, std::string_view message);
inline void trace(std::string_view m) { if (enabled(Level::Trace)) write(Level::Trace, m); }
inline void debug(std::string_view m) { if (enabled(Level::Debug)) write(Level::Debug, m); }
inline void info(std::string_view m) { if (enabled(Level::Info)) write(Level::Info, m); }
inline void warn(std::string_view m) { if (enabled(Level::Warn)) write(Level::Warn, m); }

/// Writes `message` the first time this process sees `key` only: the same decision is made
/// for every layer and micro-batch (a collective of one shape, one kernel shape), and is
/// worth one line. Callers test enabled() first so that building the key costs nothing at
/// the default level. Thread-safe.
void once(Level level, const std::string& key, std::string_view message);

}  // namespace cpsim::log
