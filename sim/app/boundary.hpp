#pragma once
/// The one error boundary of every subcommand (main.cpp): bad input is exit 2 with its
/// position, anything else exit 1 with a one-line reason, and running out of memory anywhere
/// (in SimGrid's actors too, where an exception cannot travel) exit 1 with what was being done
/// and what to try. Never an abort or a backtrace.
#include <functional>
#include <string>
#include <vector>

namespace cpsim::app {

/// What the process is doing, for the out-of-memory message ("replaying 2.1 M ops"). The text
/// is copied into a fixed buffer, so the handler that prints it allocates nothing.
void set_phase(const std::string& what);

/// Installs the out-of-memory handler (std::set_new_handler) and a std::terminate handler that
/// turn any escape into a one-line message and exit code 1.
void install_crash_handlers();

/// Runs `body` (the CLI parse and the chosen subcommand) and maps what it throws to the exit
/// code: scenario::InputError -> 2, std::bad_alloc -> 1 "out of memory while ...", any other
/// exception -> 1 with its message.
int run_guarded(const std::function<int()>& body);

/// `did you mean 'run'?` for a mistyped subcommand or flag: the closest of `names` when it is
/// close enough to be a typo, else "".
std::string suggest(const std::string& word, const std::vector<std::string>& names);

}  // namespace cpsim::app
