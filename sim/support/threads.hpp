#pragma once
/// Splitting a pass over a graph's ops or ranks across the machine's cores, for the stages that
/// read a built graph (the report's per-rank parts, the replay's wait counts). One helper, so
/// that every such pass picks its threads, and fails, the same way.
#include <algorithm>
#include <cstddef>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace cpsim::support {

/// Threads for `work` ops or entries: `asked` if set, else the machine's cores up to 4, and one
/// for less than 2^18 (a thread's start costs ~50 us).
unsigned threads_for(unsigned asked, size_t work);

/// (A template, so in the header: the pass's body is the caller's.)
/// f(0) .. f(n - 1), f(0) on the calling thread (and any a thread could not be started for);
/// the first exception thrown is rethrown here, after every thread has ended.
template <class F>
void on_threads(unsigned n, F&& f) {
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](unsigned w) {
    try {
      f(w);
    } catch (...) {
      errors[w] = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  others.reserve(n);
  std::vector<unsigned> here{0};
  for (unsigned w = 1; w < n; ++w) {
    try {
      others.emplace_back(run, w);
    } catch (const std::system_error&) {
      here.push_back(w);
    }
  }
  for (const unsigned w : here) run(w);
  for (std::thread& t : others) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace cpsim::support
