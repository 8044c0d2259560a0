// Scalar readers of the located tree (yaml_tree.hpp): numbers, units, enums and ranges, each
// failing at the node with the form it expected.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {
namespace {

std::string fmt_num(double v) {
  std::ostringstream o;
  o.precision(15);
  o << v;
  return o.str();
}

}  // namespace

MapReader::MapReader(const Node& n, std::vector<std::string> allowed) : n_(n) {
  if (n.is_null()) return;
  if (!n.is_map()) fail_at(n, "expected a mapping, got " + n.describe());
  for (const auto& c : n.children) {
    if (std::find(allowed.begin(), allowed.end(), c.key) != allowed.end()) continue;
    if (auto s = did_you_mean(c.key, allowed))
      fail_key(c, "unknown key '" + c.key + "' (did you mean '" + *s + "'?)");
    fail_key(c, "unknown key '" + c.key + "'; allowed: " + join(allowed));
  }
}

const Node* MapReader::get(std::string_view key) const { return n_.find(key); }

const Node& MapReader::require(std::string_view key) const {
  if (const Node* c = n_.find(key)) return *c;
  const Origin& at = n_.key_at.src ? n_.key_at : n_.at;
  fail(at, n_.path, "missing required key '" + std::string(key) + "'");
}

std::string as_string(const Node& n) {
  if (!n.is_scalar()) fail_at(n, "expected a string, got " + n.describe());
  return n.scalar;
}

int64_t as_int(const Node& n, int64_t min, int64_t max) {
  if (!n.is_scalar()) fail_at(n, "expected an integer, got " + n.describe());
  const std::string& s = n.scalar;
  int64_t v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  auto [p, ec] = std::from_chars(b, e, v);
  if (b == e || p != e) fail_at(n, "expected an integer, got '" + s + "'");
  if (ec == std::errc::result_out_of_range) fail_at(n, "integer '" + s + "' is out of range");
  if (v < min) fail_at(n, "must be >= " + std::to_string(min) + ", got " + s);
  if (v > max) fail_at(n, "must be <= " + std::to_string(max) + ", got " + s);
  return v;
}

uint64_t as_uint64(const Node& n) {
  if (!n.is_scalar()) fail_at(n, "expected a non-negative integer, got " + n.describe());
  const std::string& s = n.scalar;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || p != s.data() + s.size())
    fail_at(n, "expected a non-negative integer, got '" + s + "'");
  if (ec == std::errc::result_out_of_range) fail_at(n, "integer '" + s + "' is out of range");
  return v;
}

double as_number(const Node& n) {
  if (!n.is_scalar()) fail_at(n, "expected a number, got " + n.describe());
  const std::string& s = n.scalar;
  char* end = nullptr;
  errno = 0;
  const bool plain = !s.empty() && s.find_first_not_of("+-.0123456789eE") == std::string::npos;
  const double v = plain ? std::strtod(s.c_str(), &end) : 0.0;
  if (!plain || end != s.c_str() + s.size()) fail_at(n, "expected a number, got '" + s + "'");
  if (!std::isfinite(v) || errno == ERANGE) fail_at(n, "number '" + s + "' is out of range");
  return v;
}

bool as_bool(const Node& n) {
  if (n.is_scalar()) {
    const std::string s = lower_norm(n.scalar);
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail_at(n, "expected true or false, got " + n.describe());
}

namespace {
template <class F>
double as_unit(const Node& n, F parse, const char* kind_example) {
  if (!n.is_scalar()) fail_at(n, std::string("expected ") + kind_example + ", got " + n.describe());
  try {
    return parse(n.scalar);
  } catch (const std::invalid_argument& e) {
    fail_at(n, e.what());
  }
}
}  // namespace

double as_bytes(const Node& n) { return as_unit(n, parse_bytes, "a size such as 80GiB, 1.5GB or 4096"); }
double as_bandwidth(const Node& n) {
  return as_unit(n, parse_bandwidth, "a bandwidth such as 450GBps, 46GB/s or 400Gbps");
}
double as_time(const Node& n) { return as_unit(n, parse_time, "a time such as 1.5us, 150ns or 3ms"); }
double as_flops(const Node& n) { return as_unit(n, parse_flops, "a FLOP rate such as 989TFLOPS or 989e12"); }
int64_t as_tokens(const Node& n) {
  const double v = as_unit(n, parse_tokens, "a token count such as 128K, 1M or 32768");
  if (v > 9.0e18) fail_at(n, "token count '" + n.scalar + "' is out of range");
  return static_cast<int64_t>(v);
}

size_t as_choice(const Node& n, const std::vector<std::string>& names) {
  if (n.is_scalar()) {
    const std::string s = lower_norm(n.scalar);
    for (size_t i = 0; i < names.size(); ++i)
      if (lower_norm(names[i]) == s) return i;
  }
  std::string msg = "unknown value " + n.describe();
  if (n.is_scalar())
    if (auto s = did_you_mean(n.scalar, names)) msg += " (did you mean '" + *s + "'?)";
  fail_at(n, msg + "; allowed: " + join(names));
}

void check_min(const Node& n, double v, double min, bool inclusive) {
  if (inclusive ? v >= min : v > min) return;
  fail_at(n, std::string("must be ") + (inclusive ? ">= " : "> ") + fmt_num(min) + ", got " +
                 (n.is_scalar() ? n.scalar : fmt_num(v)));
}

void check_max(const Node& n, double v, double max, bool inclusive) {
  if (inclusive ? v <= max : v < max) return;
  fail_at(n, std::string("must be ") + (inclusive ? "<= " : "< ") + fmt_num(max) + ", got " +
                 (n.is_scalar() ? n.scalar : fmt_num(v)));
}

}  // namespace cpsim::scenario::detail
