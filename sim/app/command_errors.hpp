#pragma once
/// How a subcommand reports what its work threw, written once for `run`, `check` and
/// `kernels price`: bad input is exit 2 with its position, a failure exit 1 with its reason.
#include <functional>
#include <string>

namespace cpsim::app {

/// Runs `body` and returns its exit code, or what it threw as one line on stderr:
/// scenario::InputError -> its own message (file:line:col: error: ...), 2;
/// std::invalid_argument -> "WHO: error: what", 2; any other exception -> "WHO: FAILEDwhat", 1
/// (`failed` is e.g. "simulation failed: ").
int report_errors(const std::string& who, const std::string& failed, const std::function<int()>& body);

}  // namespace cpsim::app
