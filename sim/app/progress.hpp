#pragma once
/// The progress line of long runs: on stderr, rewritten in place, naming the phase
/// (build graph / replay / report / ...) and, while replaying, the simulated time and the ops
/// done. Silent for the first second (most runs end before) and when disabled (-q, or stderr
/// not a terminal, so logs and pipes never see it).
#include <chrono>
#include <cstddef>
#include <string>

namespace cpsim::app {

class Progress {
 public:
  /// `lines`: for a log or a pipe (`--progress` without a terminal): each phase and at most one
  /// status every kLineEveryS seconds on a line of its own, from the start, never rewritten.
  explicit Progress(bool enabled, bool lines = false);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Enters a phase ("build graph", "replay", "report", ...).
  void phase(const std::string& name);
  /// Within a phase: what it has done so far ("12 of 48 steps"), redrawn at most every kRedrawS.
  void status(const std::string& text);
  /// During the replay: simulated seconds reached and ops completed out of `total`.
  void replay(double sim_s, size_t done, size_t total);
  /// Clears the line (if one was drawn); later calls draw nothing.
  void finish();

 private:
  void draw(const std::string& text, bool force);
  bool enabled_;
  bool lines_;
  bool drawn_ = false;
  std::string phase_;
  std::chrono::steady_clock::time_point start_, last_;
};

/// Whether a command should show progress: not quiet and stderr is a terminal.
bool progress_wanted(bool quiet);
/// Whether stderr is a terminal (a progress line rewritten in place), else a log (lines).
bool stderr_is_terminal();

}  // namespace cpsim::app
