#pragma once
/// What this process owns and must not leave behind when a signal ends it: its child processes
/// and its temporary files. Every child cpsim starts comes from start_child (the one place that
/// creates processes), so every child dies with its parent, whatever ends the parent (SIGKILL
/// included: PR_SET_PDEATHSIG), and SIGINT, SIGTERM or SIGHUP kills and reaps the children,
/// removes the temporaries and exits 128 + the signal (130, 143, 129).
#include <sys/types.h>

#include <string>

namespace cpsim::support {

/// Installs the SIGINT/SIGTERM/SIGHUP handler above; call once at start. A command that stops
/// gracefully on a signal (a sweep writes its results table first) installs its own for a
/// while (app/process_pool.hpp InterruptGuard) and restores this one.
void install_signal_cleanup();

/// Installs the handler again if install_signal_cleanup ran (a library that took the signals
/// for itself, SimGrid's engine, gives them back); nothing otherwise.
void reclaim_signals();

/// Starts a child process: returns its pid in the parent, 0 in the child, -1 (errno set) on
/// failure. The child is killed (SIGKILL) when this process dies, leads its own
/// process group when `own_group` (a terminal's Ctrl-C then reaches only its parent, which
/// stops it), and inherits none of its parent's children or temporaries. Call from the main
/// thread: the kernel's parent-death signal follows the thread that started the child.
pid_t start_child(bool own_group);

/// Waits for the child `pid` to end and reaps it; its waitpid status. It is forgotten before it
/// is reaped, so a signal never kills a pid the system has given to another process.
int wait_child(pid_t pid);
/// The same without blocking: true with its status once it ended and is reaped, false while it
/// runs. A pid that is not a child (already reaped) is true with status -1 and errno set.
bool poll_child(pid_t pid, int& status);

/// `path` is a temporary file: removed if a signal ends the process before forget_temporary.
void track_temporary(const std::string& path);
void forget_temporary(const std::string& path);

}  // namespace cpsim::support
