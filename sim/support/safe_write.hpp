#pragma once
/// Every file cpsim writes goes through here, so no output can destroy what it replaces:
/// outputs are checked before any work starts (not an input, not another output of the same
/// command, not a device node, FIFO, socket or directory), and written to a temporary file with
/// an unpredictable name, created with O_EXCL|O_NOFOLLOW in the target's directory (so a
/// planted symlink is never followed), then renamed over the target.
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

/// Throws OutputError when an output is a directory, a device node, a FIFO or a socket, the
/// same file as one of `inputs`, or the same file as another output. Symlinks are resolved:
/// a link to a regular file writes that file.
void check_outputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs = {});

/// The file a write to `path` lands in: `path` with symlinks resolved (a dangling or missing
/// target is `path` itself, made absolute).
std::string write_target(const std::string& path);

/// Writes `text` to `path` atomically (see above). Throws std::runtime_error on failure, and
/// OutputError for a target check_outputs refuses.
void write_file_atomic(const std::string& path, const std::string& text);
/// The same, streamed: `write` fills the private temporary through a buffered stream, so a
/// large output (the Chrome trace) is never held in memory; the target is replaced only when
/// `write` returned and every byte reached the file.
void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Prefix of the temporary files write_file_atomic leaves when killed mid-write: in the
/// target's directory, "." + file name + ".tmp." + 16 random hex digits.
std::string temp_prefix(const std::string& file_name);

/// Sanitises a name for use as one path component: anything but letters, digits, '.', '-'
/// and '_' becomes '-', a leading '.' too (no "..", no hidden files); never empty.
std::string path_component(const std::string& name);

}  // namespace cpsim::support
