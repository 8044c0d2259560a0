// The CLI of every subcommand, in-process (dispatch.hpp); main.cpp adds the crash handlers.
#include "app/dispatch.hpp"

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <iostream>
#include <string>
#include <vector>

#include "app/boundary.hpp"
#include "app/commands.hpp"
#include "log/log.hpp"
#include "cpsim_version.hpp"
#include "support/std_streams.hpp"

namespace cpsim::app {
namespace {

/// "error: unknown subcommand 'rn' (did you mean 'run'?)" before CLI11's generic message.
bool unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  const std::string word = argv[1];
  for (const auto& n : names)
    if (n == word) return false;
  std::string msg = "error: unknown subcommand '" + word.substr(0, 64) + "'";
  const std::string s = cpsim::app::suggest(word, names);
  msg += s.empty() ? "; the subcommands are: " + CLI::detail::join(names, ", ") : " (did you mean '" + s + "'?)";
  std::cerr << msg << "\n";
  return true;
}

/// For each unknown --flag given to the chosen subcommand, the closest known one.
void suggest_flags(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) return;
  const CLI::App* sub = nullptr;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; }))
    if (s->get_name() == argv[1]) sub = s;
  if (sub == nullptr) return;
  std::vector<std::string> longs;
  for (const CLI::Option* o : sub->get_options())
    for (const auto& l : o->get_lnames()) longs.push_back("--" + l);
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") break;
    if (!a.starts_with("--")) continue;
    a = a.substr(0, a.find('='));
    bool known = false;
    for (const auto& l : longs) known |= l == a;
    if (known) continue;
    const std::string s = cpsim::app::suggest(a, longs);
    if (!s.empty()) std::cerr << "error: unknown option '" << a << "' (did you mean '" << s << "'?)\n";
  }
}

/// The log level the command line asks for: --log-level wins over -v/-vv, which win over
/// CPSIM_LOG; applied as soon as either option is parsed, before the subcommand runs.
struct LogArgs {
  int verbose = 0;
  std::string level;
  std::optional<log::Level> env;
  void apply() const {
    if (!level.empty()) return log::set_level(*log::parse_level(level));
    if (verbose > 0) return log::set_level(verbose >= 2 ? log::Level::Debug : log::Level::Info);
    if (env) log::set_level(*env);
  }
};

/// -v/-vv and --log-level on every subcommand (users put them after the subcommand's other
/// arguments: `cpsim run s.yaml -v`).
void add_log_options(CLI::App& sub, const std::shared_ptr<LogArgs>& la) {
  sub.add_flag_function("-v,--verbose", [la](std::int64_t n) { la->verbose = static_cast<int>(n); la->apply(); },
                        "log what the simulator decides on stderr: -v info, -vv debug (docs/logging.md)");
  sub.add_option_function<std::string>("--log-level", [la](const std::string& v) { la->level = v; la->apply(); },
                                       "log level: trace, debug, info, warn (default), error, off; "
                                       "also the environment variable CPSIM_LOG")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "off"}));
  for (CLI::App* s : sub.get_subcommands([](const CLI::App*) { return true; })) add_log_options(*s, la);
}

}  // namespace

int dispatch(int argc, char** argv) {
  CLI::App app{"cpsim: context-parallel training simulator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cpsim ") + CPSIM_VERSION + " (git " + CPSIM_GIT_COMMIT +
                                        ", SimGrid " + CPSIM_SIMGRID_VERSION + ")");
  int rc = 0;
  register_run(app, rc);
  register_check(app, rc);
  register_kernels(app, rc);
  register_partition(app, rc);
  register_collective(app, rc);
  register_sweep(app, rc);
  register_import(app, rc);
  register_memory(app, rc);
  register_plan(app, rc);
  register_calibrate(app, rc);
  register_compare(app, rc);
  register_diff(app, rc);
  auto log_args = std::make_shared<LogArgs>();
  if (const char* env = std::getenv("CPSIM_LOG"); env != nullptr && *env != '\0') {
    log_args->env = log::parse_level(env);
    if (!log_args->env) {
      std::cerr << "error: CPSIM_LOG: '" << std::string(env).substr(0, 64) << "' is not a log level (expected one of "
                << log::level_names() << ")\n";
      return 2;
    }
    log_args->apply();
  }
  for (CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) add_log_options(*s, log_args);
  if (unknown_subcommand(app, argc, argv)) return 2;
  if (argc >= 2) set_phase(std::string("running `cpsim ") + argv[1] + "`");
  const int code = run_guarded([&] {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) suggest_flags(app, argc, argv);
      const int c = app.exit(e);
      return c == 0 ? 0 : 2;
    }
    return rc;
  });
  // Output that did not reach stdout is a failure, whatever the command thought.
  return support::finish_stdout(code);
}

}  // namespace cpsim::app
