#pragma once
/// Every file cpsim writes goes through here, so no output can destroy what it replaces:
/// outputs are checked before any work starts (not an input, not another output of the same
/// command, not a directory, block device or socket), and written to a temporary file with a
/// short unpredictable name, created with O_EXCL|O_NOFOLLOW in the target's directory, synced,
/// then renamed over the target: a full disk, a write past `ulimit -f` or a signal leaves the
/// previous file whole and no temporary (support/lifetime.hpp removes it on SIGINT/SIGTERM). A
/// symlink at the target is replaced, never followed. A FIFO or character device (/dev/null,
/// /dev/stdout) is written in place, never replaced by a file.
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cpsim::support {

/// An output path that must not be written: exit code 2 (bad input), as std::invalid_argument.
class OutputError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// One output of a command: the option that names it and its path ("" = not written).
struct NamedPath {
  std::string option;  ///< e.g. "--json"
  std::string path;
};

/// Throws OutputError when an output is a directory, a block device or a socket, the same file
/// as one of `inputs` (a link to it included), or the same file as another output.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {});

/// The file a write to `path` replaces: `path` made absolute, its directory's symlinks resolved,
/// its own file name not (a symlink there is replaced by the new file).
std::string write_target(const std::string& path);

/// Writes `text` to `path` atomically (see above). Throws std::runtime_error on failure, and
/// OutputError for a target check_outputs refuses.
void write_file_atomic(const std::string& path, const std::string& text);
/// The same, streamed: `write` fills the private temporary through a buffered stream, so a
/// large output (the Chrome trace) is never held in memory; the target is replaced only when
/// `write` returned and every byte reached the file.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Prefix of the temporary files write_file_atomic leaves when killed with SIGKILL mid-write:
/// in the target's directory, "." + the file name's first 200 bytes + ".tmp." + 16 random hex
/// digits (at most 222 bytes, so any legal target name has a legal temporary).
std::string temp_prefix(const std::string& file_name);

/// Sanitises a name for use as one path component: anything but letters, digits, '.', '-'
/// and '_' becomes '-', a leading '.' too (no "..", no hidden files); never empty.
std::string path_component(const std::string& name);

}  // namespace cpsim::support
