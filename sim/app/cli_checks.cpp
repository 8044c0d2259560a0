#include "app/cli_checks.hpp"

#include <cctype>
#include <string>

namespace cpsim::app {

CLI::Validator whole_number(int64_t lo, int64_t hi) {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const std::string shown = "'" + text.substr(0, 40) + (text.size() > 40 ? "...'" : "'");
        const bool negative = !text.empty() && text[0] == '-';
        const size_t first = negative ? 1 : 0;
        bool digits = text.size() > first;
        for (size_t i = first; i < text.size(); ++i) digits &= std::isdigit(static_cast<unsigned char>(text[i])) != 0;
        if (!digits) return "expected a whole number from " + range + ", got " + shown;
        // More than 18 digits is past every bound here (and past int64's 9.2e18).
        const std::string mag = text.substr(first);
        const size_t nz = mag.find_first_not_of('0');
        const std::string sig = nz == std::string::npos ? "0" : mag.substr(nz);
        if (sig.size() > 18) return "must be from " + range + ", got " + shown;
        const int64_t v = (negative ? -1 : 1) * static_cast<int64_t>(std::stoll(sig));
        if (v < lo || v > hi) return "must be from " + range + ", got " + shown;
        return "";
      },
      "INT:" + range);
}

}  // namespace cpsim::app
