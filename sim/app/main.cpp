// cpsim: the composition root. The standard streams guarded, children and temporaries cleaned up
// on SIGINT/SIGTERM, the process-wide crash handlers, then the command line (app/dispatch.cpp: every subcommand inside one error boundary). Nothing
// below this file calls exit().
#include "app/boundary.hpp"
#include "app/dispatch.hpp"
#include "support/lifetime.hpp"
#include "support/std_streams.hpp"

int main(int argc, char** argv) {
  cpsim::support::guard_std_streams();  // before anything opens a file
  cpsim::support::install_signal_cleanup();
  cpsim::app::install_crash_handlers();
  return cpsim::app::dispatch(argc, argv);
}
