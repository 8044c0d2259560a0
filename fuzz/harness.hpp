#pragma once
/// Shared by the fuzz targets (fuzz_<loader>.cpp): a private sandbox directory laid out like the
/// source tree, the file each input is written to, and the rule for what counts as a finding.
///
/// Each target defines LLVMFuzzerTestOneInput. Built with -fsanitize=fuzzer it is driven by
/// libFuzzer; built with replay_main.cpp it is a plain program that feeds it each file it is
/// given (the regression corpus in the normal test suite, under gcc and ASan too).
///
/// A bad input must end in scenario::InputError (the file:line:col contract of load.hpp); any
/// other exception aborts, so libFuzzer records it as a crash, as it does a sanitizer report,
/// a failed check() and (with -timeout) a hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "scenario/load.hpp"

namespace cpsim::fuzz {

/// <tmp>/cpsim-fuzz-<pid>/work: holds symlinks to every file of tests/scenario/data, and has
/// the source tree's scenarios/, platforms/, sweeps/ and kernels/ as siblings (symlinks), so
/// the relative references of the seed corpus (`base: ../scenarios/x.yaml`,
/// `platform: custom-platform.yaml`) resolve as they do in the tree. Made once per process,
/// removed at exit.
const std::string& work_dir();

/// Writes the input to work_dir()/<name> (replacing the last input) and returns its path.
std::string write_input(const std::string& name, const uint8_t* data, size_t size);

/// The input's lines that start with `prefix` ("#set "), without it: targets read extra
/// arguments (overrides, preset parameters) from such YAML comments, so seeds stay valid YAML.
/// At most `max` are returned.
std::vector<std::string> directive_lines(std::string_view text, std::string_view prefix,
                                         size_t max = 8);

/// Called by a target when an exception other than InputError escaped a loader: prints its
/// type and message and aborts.
[[noreturn]] void unexpected_exception(const char* target);

/// A property of what a loader accepted (a finite cost, say); prints `what` and aborts if false.
void check(bool ok, const char* target, const std::string& what);

/// Runs `load`: scenario::InputError is the expected end of a bad input; anything else is a
/// finding and aborts the process.
template <class F>
void guarded(const char* target, F&& load) {
  try {
    load();
  } catch (const scenario::InputError&) {
  } catch (...) {
    unexpected_exception(target);
  }
}

}  // namespace cpsim::fuzz
