#include "log/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace cpsim::log {
namespace {

std::atomic<Level> g_level{Level::Warn};

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::Trace: return spdlog::level::trace;
    case Level::Debug: return spdlog::level::debug;
    case Level::Info: return spdlog::level::info;
    case Level::Warn: return spdlog::level::warn;
    case Level::Error: return spdlog::level::err;
    case Level::Off: break;
  }
  return spdlog::level::off;
}

/// One logger on stderr, unbuffered as stderr is, with no time stamp: the lines describe the
/// simulation, not the wall clock, so the same run logs the same bytes.
spdlog::logger& logger() {
  static spdlog::logger l = [] {
    spdlog::logger made("cpsim", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    made.set_pattern("%n: %l: %v");
    made.set_level(spdlog::level::trace);  // filtered by g_level before it gets here
    made.flush_on(spdlog::level::trace);
    return made;
  }();
  return l;
}

const char* name_of(Level l) {
  switch (l) {
    case Level::Trace: return "trace";
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    case Level::Error: return "error";
    case Level::Off: break;
  }
  return "off";
}

}  // namespace

std::optional<Level> parse_level(std::string_view n) {
  if (n == "trace") return Level::Trace;
  if (n == "debug") return Level::Debug;
  if (n == "info") return Level::Info;
  if (n == "warn" || n == "warning") return Level::Warn;
  if (n == "error") return Level::Error;
  if (n == "off") return Level::Off;
  return std::nullopt;
}

const char* level_names() { return "trace, debug, info, warn, error, off"; }

void set_level(Level l) {
  g_level.store(l, std::memory_order_relaxed);
  ::setenv("CPSIM_LOG", name_of(l), 1);
}

Level level() { return g_level.load(std::memory_order_relaxed); }

bool enabled(Level l) { return l != Level::Off && l >= g_level.load(std::memory_order_relaxed); }

void write(Level l, std::string_view m) {
  if (!enabled(l)) return;
  logger().log(to_spdlog(l), "{}", m);
}

void once(Level l, const std::string& key, std::string_view m) {
  if (!enabled(l)) return;
  static std::mutex mu;
  static std::unordered_set<std::string> seen;
  {
    const std::lock_guard<std::mutex> lock(mu);
    if (!seen.insert(key).second) return;
  }
  write(l, m);
}

}  // namespace cpsim::log
