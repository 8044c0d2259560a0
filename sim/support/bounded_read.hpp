#pragma once
/// Every input file cpsim reads whole (scenarios, platforms, models, sweeps, profiles, Hugging
/// Face configs, a sweep's shards and results) is read here: it must be a regular file (a FIFO
/// would block the read forever, /dev/zero never end), and at most a size cap, counted as read.
#include <cstddef>
#include <optional>
#include <string>

namespace cpsim::support {

/// The cap of a config-sized input: 16 MiB, 100x the largest bundled file.
inline constexpr size_t kMaxInputBytes = 16u << 20;

/// The text of `path`, or nullopt with `why` saying what is wrong in a few words ("it is a
/// FIFO; a regular file is required", "larger than 16 MiB", "No such file or directory"); the
/// caller names the file and its role. Opened without blocking (O_NONBLOCK), so a FIFO is
/// refused, never waited on.
std::optional<std::string> read_regular_file(const std::string& path, size_t max_bytes, std::string& why);

}  // namespace cpsim::support
