#pragma once
/// Loading scenario, platform and model files. The scenario stage is the only one that parses
/// input files and the scenario's units (flags are parsed by sim/app's subcommands).
/// Every bad input throws InputError whose what() is the full user-facing message:
///   file:line:col: error: <yaml.path>: <what was expected>
///     <the offending source line>
///     <caret under the column>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenario/specs.hpp"

namespace cpsim::scenario {

class InputError : public std::runtime_error {
 public:
  InputError(std::string message, std::string file, int line, int col, std::string yaml_path)
      : std::runtime_error(std::move(message)), file_(std::move(file)), line_(line), col_(col),
        yaml_path_(std::move(yaml_path)) {}
  /// As above, also keeping the bare message (what() without location and source line).
  InputError(std::string message, std::string file, int line, int col, std::string yaml_path,
             std::string reason)
      : std::runtime_error(std::move(message)), file_(std::move(file)), line_(line), col_(col),
        yaml_path_(std::move(yaml_path)), reason_(std::move(reason)) {}
  const std::string& file() const { return file_; }
  int line() const { return line_; }      ///< 1-based, 0 if unknown
  int col() const { return col_; }        ///< 1-based, 0 if unknown
  const std::string& yaml_path() const { return yaml_path_; }
  /// The message alone, one line, without file, path or source line (for CSV rows).
  const std::string& reason() const { return reason_; }

 private:
  std::string file_;
  int line_, col_;
  std::string yaml_path_;
  std::string reason_;
};

/// Directory holding platforms/, scenarios/ and kernels/profiles/: $CPSIM_DATA_DIR if set,
/// else the source tree the binary was built from.
std::string data_dir();

/// Loads a scenario file, applying `overrides` ("key.path=value", YAML value syntax) first.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {});

/// Whether the scenario file at `path`, with `overrides` applied, writes the key at `key_path`
/// ("training.precision"), as opposed to leaving it to its default. Throws InputError as
/// load_scenario does.
bool key_given(const std::string& path, const std::vector<std::string>& overrides, const std::string& key_path);

/// Parses scenario text (for tests and sweeps); `file` is only used in messages.
Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<std::string>& overrides = {});

/// A platform preset name (platforms/<name>.yaml) or a path to a platform file.
/// `params` are "key=value" preset parameters such as "nodes=4".
PlatformSpec load_platform(const std::string& name_or_path,
                           const std::vector<std::string>& params = {});

/// A model preset name (scenarios/models/<name>.yaml) or a path.
ModelSpec load_model(const std::string& name_or_path);

/// Unit parsing (exposed for tests and the CLI). Throw std::invalid_argument with a reason.
double parse_bytes(const std::string& s);          ///< "80GiB", "1.5GB", "4096" -> bytes
double parse_bandwidth(const std::string& s);      ///< "450GBps", "400Gbps", "46GB/s" -> B/s
double parse_time(const std::string& s);           ///< "1.5us", "3ms", "2s" -> s
double parse_tokens(const std::string& s);         ///< "128K" (=131072), "1M", "32768"
double parse_flops(const std::string& s);          ///< "989TFLOPS", "989e12" -> FLOP/s

}  // namespace cpsim::scenario
