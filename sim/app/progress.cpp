#include "app/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace cpsim::app {

namespace {
// Runs shorter than this print nothing; redraws at most this often (a terminal write per
// completed op batch would cost more than the replay on small graphs).
constexpr double kQuietFirstS = 1.0;
constexpr double kRedrawS = 0.25;
// In a log a status line every few seconds says the run is alive without flooding it.
constexpr double kLineEveryS = 5.0;
}  // namespace

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

bool progress_wanted(bool quiet) { return !quiet && stderr_is_terminal(); }

Progress::Progress(bool enabled, bool lines)
    : enabled_(enabled), lines_(lines), start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() { finish(); }

void Progress::phase(const std::string& name) {
  phase_ = name;
  draw(name, true);
}

void Progress::status(const std::string& text) { draw(phase_.empty() ? text : phase_ + ": " + text, false); }

void Progress::replay(double sim_s, size_t done, size_t total) {
  if (!enabled_) return;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: %.4f s simulated, %zu of %zu ops (%.0f %%)", phase_.c_str(),
                sim_s, done, total, total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0);
  draw(buf, false);
}

void Progress::draw(const std::string& text, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double since_start = std::chrono::duration<double>(now - start_).count();
  if (lines_) {
    if (!force && std::chrono::duration<double>(now - last_).count() < kLineEveryS) return;
    last_ = now;
    std::fprintf(stderr, "cpsim: %s  [%.0f s]\n", text.c_str(), since_start);
    std::fflush(stderr);
    return;
  }
  if (since_start < kQuietFirstS) return;
  if (!force && std::chrono::duration<double>(now - last_).count() < kRedrawS) return;
  last_ = now;
  std::fprintf(stderr, "\r\033[Kcpsim: %s  [%.0f s]", text.c_str(), since_start);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  drawn_ = false;
  enabled_ = false;
}

}  // namespace cpsim::app
