#pragma once
/// The process's standard streams, checked: output the user asked for is never lost with exit
/// code 0. At start, a closed fd 0-2 is opened on /dev/null so that no file cpsim opens later
/// lands on it (a sweep's lock file took fd 2 and received the progress lines); a closed stdout
/// is opened read-only, so that every write to it fails and is reported instead of vanishing.
/// SIGXFSZ is ignored, so a write past `ulimit -f` fails with EFBIG and is reported (with its
/// temporary removed) instead of killing the process mid-file.

namespace cpsim::support {

/// Call first in main(), before anything opens a file.
void guard_std_streams();

/// Flushes std::cout and stdio's stdout; when any write to standard output failed (a full
/// disk, /dev/full, a closed stdout, a reader gone with SIGPIPE ignored), prints one line
/// naming it on stderr and returns 1; otherwise returns `rc`. A failed command keeps its code.
int finish_stdout(int rc);

/// Whether fd `fd` (0-2) was closed when the process started (guard_std_streams).
bool was_closed(int fd);

}  // namespace cpsim::support
