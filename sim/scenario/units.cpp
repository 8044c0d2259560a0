// Unit parsing: the only place that turns "450GBps", "1.5us" or "128K" into SI numbers.
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenario/load.hpp"

namespace cpsim::scenario {
namespace {

struct Unit {
  std::string name;
  double factor;
};

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

/// Length of the decimal number at the start of `s` ([+-] digits [. digits] [e[+-]digits]),
/// 0 if there is none. Deliberately rejects "inf", "nan", hex and a bare ".".
size_t number_prefix(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t exp_digits = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j, ++exp_digits;
    if (exp_digits > 0) i = j;
  }
  return i;
}

std::string unit_names(const std::vector<Unit>& units) {
  std::string out;
  for (const auto& u : units) {
    if (u.name.empty()) continue;
    if (!out.empty()) out += ", ";
    out += u.name;
  }
  return out;
}

/// Parses "<number>[ ]<unit>" with `units` (an empty unit name = a bare number).
/// `kind` and `example` word the messages ("a size", "80GiB, 1.5GB or 4096").
double parse_quantity(const std::string& raw, const std::string& kind, const std::string& example,
                      const std::vector<Unit>& units, const std::string& allowed_text = "") {
  const std::string s = trim(raw);
  if (s.empty()) throw std::invalid_argument("expected " + kind + " such as " + example + ", got nothing");
  const size_t n = number_prefix(s);
  if (n == 0)
    throw std::invalid_argument("expected " + kind + " such as " + example + ", got '" + s + "'");
  const std::string unit = trim(s.substr(n));
  const Unit* found = nullptr;
  for (const auto& u : units)
    if (u.name == unit) found = &u;
  if (!found) {
    const unsigned char c0 = unit.empty() ? 0 : static_cast<unsigned char>(unit[0]);
    if (c0 < 0x80 && !std::isalpha(c0) && c0 != '/')  // "1.2.3", "5-6": not a unit at all
      throw std::invalid_argument("expected " + kind + " such as " + example + ", got '" + s + "'");
    throw std::invalid_argument("unknown unit '" + unit + "' in '" + s + "'; allowed: " +
                                (allowed_text.empty() ? unit_names(units) : allowed_text));
  }
  const double number = std::strtod(s.substr(0, n).c_str(), nullptr);
  const double value = number * found->factor;
  if (!std::isfinite(value)) throw std::invalid_argument("'" + s + "' is out of range");
  if (value < 0) throw std::invalid_argument("negative value '" + s + "' is not allowed");
  return value == 0 ? 0.0 : value;  // folds -0
}

const std::vector<Unit>& byte_units() {
  static const std::vector<Unit> u = {
      {"", 1},       {"B", 1},          {"KB", 1e3},        {"kB", 1e3},
      {"MB", 1e6},   {"GB", 1e9},       {"TB", 1e12},       {"PB", 1e15},
      {"KiB", 1024}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"PiB", 1125899906842624.0}};
  return u;
}

const std::vector<Unit>& bandwidth_units() {
  static const std::vector<Unit> u = [] {
    std::vector<Unit> v = {{"", 1}};
    const std::vector<Unit> prefixes = {{"", 1},          {"k", 1e3},          {"K", 1e3},
                                        {"M", 1e6},       {"G", 1e9},          {"T", 1e12},
                                        {"P", 1e15},      {"Ki", 1024.0},      {"Mi", 1048576.0},
                                        {"Gi", 1073741824.0}, {"Ti", 1099511627776.0}};
    for (const auto& p : prefixes)
      for (const char* suffix : {"ps", "/s"}) {
        v.push_back({p.name + "B" + suffix, p.factor});
        v.push_back({p.name + "b" + suffix, p.factor / 8});
      }
    return v;
  }();
  return u;
}

const std::vector<Unit>& time_units() {
  static const std::vector<Unit> u = {{"", 1},         {"s", 1},          {"ms", 1e-3},
                                      {"us", 1e-6},    {"\u00b5s", 1e-6}, {"\u03bcs", 1e-6},
                                      {"ns", 1e-9},    {"ps", 1e-12},     {"min", 60}};
  return u;
}

const std::vector<Unit>& token_units() {
  static const std::vector<Unit> u = {{"", 1},           {"k", 1024},        {"K", 1024},
                                      {"Ki", 1024},      {"M", 1048576.0},   {"Mi", 1048576.0},
                                      {"G", 1073741824.0}, {"Gi", 1073741824.0}};
  return u;
}

const std::vector<Unit>& flops_units() {
  static const std::vector<Unit> u = [] {
    std::vector<Unit> v = {{"", 1}};
    const std::vector<Unit> prefixes = {{"", 1},    {"k", 1e3},  {"K", 1e3},   {"M", 1e6},
                                        {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}};
    for (const auto& p : prefixes)
      for (const char* suffix : {"FLOPS", "FLOP/s", "FLOPs", "flops", "flop/s"})
        v.push_back({p.name + suffix, p.factor});
    return v;
  }();
  return u;
}

}  // namespace

double parse_bytes(const std::string& s) {
  return parse_quantity(s, "a size", "80GiB, 1.5GB or 4096", byte_units());
}

double parse_bandwidth(const std::string& s) {
  const double v = parse_quantity(s, "a bandwidth", "450GBps, 46GB/s or 400Gbps", bandwidth_units(),
                                  "a prefix (k, K, M, G, T, P, Ki, Mi, Gi, Ti) with Bps or B/s for bytes, "
                                  "bps or b/s for bits");
  // Below 1 B/s a gigabyte takes longer than 30 years and step times overflow to inf: such a
  // value is a typo, not a link (0 stays: it means "none" where a key allows it).
  if (v > 0 && v < 1) throw std::invalid_argument("bandwidth '" + trim(s) + "' is below 1 B/s");
  return v;
}

double parse_time(const std::string& s) {
  return parse_quantity(s, "a time", "1.5us, 150ns or 3ms", time_units());
}

double parse_tokens(const std::string& s) {
  const double v = parse_quantity(s, "a token count", "128K, 1M or 32768", token_units());
  if (v != std::floor(v))
    throw std::invalid_argument("'" + trim(s) + "' is not a whole number of tokens");
  return v;
}

double parse_flops(const std::string& s) {
  const double v = parse_quantity(s, "a FLOP rate", "989TFLOPS or 989e12", flops_units());
  if (v > 0 && v < 1) throw std::invalid_argument("FLOP rate '" + trim(s) + "' is below 1 FLOP/s");  // as bandwidth
  return v;
}

}  // namespace cpsim::scenario
