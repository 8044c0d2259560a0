#pragma once
// Fakes of app/process_pool's Runner and Clock (as ninja tests its SubprocessSet through a fake
// CommandRunner): a point can crash, fail, or hang until killed without a stand-in program,
// and Slurm's sbatch and squeue answer from memory. The other `cpsim run` commands run the
// real built binary.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app/process_pool.hpp"
#include "support/cli.hpp"

namespace cpsim::test {

/// What a faked command does instead of running.
struct Act {
  enum Kind { Real, Crash, Exit, Hang };
  Act(Kind k = Real, int c = 0, std::string l = "") : kind(k), code(c), log(std::move(l)) {}
  Kind kind;
  int code;         ///< Crash: the signal; Exit: the exit code
  std::string log;  ///< written to the command's log (its stderr)
};

class FakeRunner : public app::pool::Runner {
 public:
  explicit FakeRunner(std::string cpsim = cli::kCpsim) : real_(std::move(cpsim)) {}

  /// The first rule whose key is a substring of the command's arguments (joined by blanks)
  /// says what it does; no rule: the real binary runs.
  std::vector<std::pair<std::string, Act>> rules;
  /// Called after a command's end was reported (with the number ended so far).
  std::function<void(size_t ended)> on_end;
  /// Answers capture() (sbatch, squeue); unset: the real program runs.
  std::function<app::pool::Captured(const std::vector<std::string>&)> on_capture;
  std::vector<std::string> started;  ///< each start_cpsim's arguments, joined
  std::vector<Id> killed;

  Id start_cpsim(const std::vector<std::string>& args, const std::string& log_path) override {
    std::string joined;
    for (const auto& a : args) joined += (joined.empty() ? "" : " ") + a;
    started.push_back(joined);
    const Id id = next_++;
    for (const auto& [key, act] : rules)
      if (joined.find(key) != std::string::npos) {
        std::ofstream(log_path) << act.log;
        fake_[id] = act;
        return id;
      }
    real_id_[id] = real_.start_cpsim(args, log_path);
    return id;
  }
  std::optional<app::pool::Exit> poll(Id id) override {
    std::optional<app::pool::Exit> e;
    if (const auto f = fake_.find(id); f != fake_.end()) {
      using How = app::pool::Exit::How;
      if (f->second.kind == Act::Crash) e = app::pool::Exit{How::Signaled, f->second.code};
      if (f->second.kind == Act::Exit) e = app::pool::Exit{How::Exited, f->second.code};
      if (f->second.kind == Act::Hang && killed_.count(id)) e = app::pool::Exit{How::Signaled, SIGKILL};
      if (e) fake_.erase(f);
    } else {
      e = real_.poll(real_id_.at(id));
    }
    if (e && on_end) on_end(++ended_);
    return e;
  }
  void kill(Id id) override {
    killed.push_back(id);
    killed_[id] = true;
    if (const auto r = real_id_.find(id); r != real_id_.end()) real_.kill(r->second);
  }
  app::pool::Captured capture(const std::vector<std::string>& argv) override {
    return on_capture ? on_capture(argv) : real_.capture(argv);
  }
  std::string cpsim() const override { return real_.cpsim(); }
  app::pool::SystemRunner& real() { return real_; }

 private:
  app::pool::SystemRunner real_;
  Id next_ = 0;
  size_t ended_ = 0;
  std::map<Id, Id> real_id_;
  std::map<Id, Act> fake_;
  std::map<Id, bool> killed_;
};

/// Time that passes only by sleeping: a timeout of 600 s or Slurm's 2 s polls take no real
/// time. Each sleep still yields a millisecond, so real commands get on meanwhile.
class FakeClock : public app::pool::Clock {
 public:
  double now_s() override { return t_; }
  void sleep_s(double s) override {
    t_ += s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  double t_ = 1000;
};

}  // namespace cpsim::test
