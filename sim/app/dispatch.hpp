#pragma once
/// The whole command line of cpsim in-process: builds the CLI, lets each subcommand register
/// itself, parses and runs the chosen one inside the error boundary (boundary.hpp). main() is
/// this plus the process-wide crash handlers; fuzz/fuzz_argv.cpp calls it once per input.
namespace cpsim::app {

/// Runs `cpsim argv[1..]` and returns its exit code: 0 ok, 1 runtime failure, 2 bad input.
/// Writes to std::cout / std::cerr; never calls exit().
int dispatch(int argc, char** argv);

}  // namespace cpsim::app
