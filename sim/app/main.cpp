// cpsim: the composition root. Reads top to bottom: build the CLI, let each subcommand
// register itself, parse, run. Nothing below this file calls exit().
#include <CLI/CLI.hpp>
#include <iostream>

#include "app/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"cpsim: context-parallel training simulator"};
  app.require_subcommand(1);
  int rc = 0;
  cpsim::app::register_run(app, rc);
  cpsim::app::register_check(app, rc);
  cpsim::app::register_kernels(app, rc);
  cpsim::app::register_partition(app, rc);
  cpsim::app::register_collective(app, rc);
  cpsim::app::register_sweep(app, rc);
  cpsim::app::register_memory(app, rc); cpsim::app::register_plan(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return rc;
}
