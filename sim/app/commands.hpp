#pragma once
/// Subcommands register themselves on the CLI11 app; main.cpp is the composition root.
#include <CLI/CLI.hpp>

namespace cpsim::app {
namespace pool {
class Runner;
class Clock;
}  // namespace pool
/// Exit codes: 0 ok, 1 simulation/runtime failure, 2 bad input.
void register_run(CLI::App& app, int& rc);
void register_check(CLI::App& app, int& rc);
void register_collective(CLI::App& app, int& rc);
void register_partition(CLI::App& app, int& rc);
void register_kernels(CLI::App& app, int& rc);
/// `cpsim kernels price` (cmd_kernels_price.cpp), under the `kernels` subcommand.
void register_kernels_price(CLI::App* kernels, int& rc);
/// `cpsim kernels gdn` (cmd_kernels_gdn.cpp): one Gated DeltaNet call, registered by the above.
void register_kernels_gdn(CLI::App* kernels, int& rc);
/// `cpsim sweep`: its commands (`cpsim run`, sbatch, squeue) run on `runner` and wait on
/// `clock`; null: the system's (tests pass fakes, tests/support/fake_runner.hpp).
void register_sweep(CLI::App& app, int& rc, pool::Runner* runner = nullptr, pool::Clock* clock = nullptr);
void register_import(CLI::App& app, int& rc);
void register_memory(CLI::App& app, int& rc);
void register_plan(CLI::App& app, int& rc);
void register_calibrate(CLI::App& app, int& rc);
void register_compare(CLI::App& app, int& rc);
/// `cpsim calibrate kernels` under `calibrate`.
void register_calibrate_kernels(CLI::App* calibrate, int& rc);
/// `cpsim diff A B`: two result JSONs, or two sweep output directories, with deltas.
void register_diff(CLI::App& app, int& rc);
}  // namespace cpsim::app
