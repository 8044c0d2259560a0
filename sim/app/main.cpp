// cpsim: the composition root. The process-wide crash handlers, then the command line
// (app/dispatch.cpp: every subcommand inside one error boundary). Nothing below this file calls
// exit().
#include "app/boundary.hpp"
#include "app/dispatch.hpp"

int main(int argc, char** argv) {
  cpsim::app::install_crash_handlers();
  return cpsim::app::dispatch(argc, argv);
}
