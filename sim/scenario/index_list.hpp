#pragma once
/// Index lists on the command line ("0-3,7": `run --trace-ranks`, `--trace-layers`), parsed here
/// with the rest of cpsim's input text.
#include <string>
#include <vector>

namespace cpsim::scenario {

/// "0-3,7" -> {0, 1, 2, 3, 7}; throws std::invalid_argument naming the expected form.
std::vector<int> parse_index_list(const std::string& s);

}  // namespace cpsim::scenario
