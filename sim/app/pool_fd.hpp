#pragma once
/// File-descriptor and process helpers shared by process_pool.cpp and worker_pool.cpp (both
/// own child processes); not for other code.
#include <sys/types.h>

#include <cstddef>
#include <string>

namespace cpsim::app::pool::detail {

/// Writes all of `s` (retrying EINTR); false when the pipe closed or failed.
bool write_all(int fd, const std::string& s);
/// Reads exactly `n` bytes into `buf`; false at end of file or on an error first.
bool read_exact(int fd, void* buf, size_t n);
/// waitpid(pid) to its end, retrying EINTR; the status.
int wait_for(pid_t pid);
/// "killed by signal 9 (Killed)" or "exited with code 3", from a waitpid status.
std::string describe_status(int status);

}  // namespace cpsim::app::pool::detail
