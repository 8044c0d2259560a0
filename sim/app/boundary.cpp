#include "app/boundary.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>

#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::app {

namespace {

char g_phase[256] = "starting";

constexpr const char kOomAdvice[] =
    "; try a smaller simulation.scope, fewer training.micro_batches, --trace-ranks/--trace-layers, "
    "or check the estimate with --max-memory";

void write_err(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

/// operator new failed: say so without allocating and leave, wherever it happened (SimGrid runs
/// actors on their own stacks, where an exception would end in std::terminate).
[[noreturn]] void on_out_of_memory() {
  // One message: threads that run out at the same moment wait for the first to exit.
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    for (;;) ::pause();
  write_err("cpsim: out of memory while ");
  write_err(g_phase);
  write_err(kOomAdvice);
  write_err("\n");
  ::_exit(1);
}

[[noreturn]] void on_terminate() {
  const char* what = "an unknown error";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc&) {
      on_out_of_memory();
    } catch (const std::exception& ex) {
      write_err("cpsim: internal error while ");
      write_err(g_phase);
      write_err(": ");
      write_err(ex.what());
      write_err("\n");
      ::_exit(1);
    } catch (...) {
    }
  }
  write_err("cpsim: internal error while ");
  write_err(g_phase);
  write_err(": ");
  write_err(what);
  write_err("\n");
  ::_exit(1);
}

/// The first line of a message, at most 2,000 characters (a message may quote a huge input).
std::string one_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() > 2000) line = line.substr(0, 2000) + " ...";
  return line;
}

}  // namespace

void set_phase(const std::string& what) {
  const size_t n = std::min(what.size(), sizeof g_phase - 1);
  std::memcpy(g_phase, what.data(), n);
  g_phase[n] = '\0';
}

void install_crash_handlers() {
  std::set_new_handler(on_out_of_memory);
  std::set_terminate(on_terminate);
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const scenario::InputError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    on_out_of_memory();
  } catch (const std::invalid_argument& e) {  // bad input the commands did not catch themselves
    std::cerr << "error: " << one_line(e.what()) << "\n";
    return 2;
  } catch (const std::logic_error& e) {  // a broken invariant (out_of_range, a graph cycle): a bug
    std::cerr << "cpsim: internal error while " << g_phase << ": " << one_line(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "cpsim: error while " << g_phase << ": " << one_line(e.what()) << "\n";
    return 1;
  } catch (...) {
    std::cerr << "cpsim: error while " << g_phase << ": an unknown exception\n";
    return 1;
  }
}

std::string suggest(const std::string& word, const std::vector<std::string>& names) {
  if (word.empty() || word.size() > 64) return "";
  return scenario::detail::did_you_mean(word, names).value_or("");
}

}  // namespace cpsim::app
