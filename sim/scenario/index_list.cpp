#include "scenario/index_list.hpp"

#include <stdexcept>

namespace cpsim::scenario {

std::vector<int> parse_index_list(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string part = s.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        out.push_back(std::stoi(part));
      } else {
        const int a = std::stoi(part.substr(0, dash)), b = std::stoi(part.substr(dash + 1));
        if (b < a || b - a > 1000000) throw std::invalid_argument("range");
        for (int i = a; i <= b; ++i) out.push_back(i);
      }
    } catch (const std::exception&) {
      throw std::invalid_argument("expected a list like 0-3,7; got '" + s + "'");
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace cpsim::scenario
