// JSON config files read key by key with positions (json_object.hpp).
#include "scenario/json_object.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include "scenario/load.hpp"

namespace cpsim::scenario::detail {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return lines;
}

/// 1-based line and column of byte offset `pos`.
Origin origin_at(const std::shared_ptr<const Source>& src, const std::string& text, size_t pos) {
  Origin o{src, 1, 1};
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++o.line;
      o.col = 1;
    } else {
      ++o.col;
    }
  }
  return o;
}

/// The nesting a config may have: as deep as a YAML document may be (yaml_parse.cpp), far past
/// any real config.json (3 levels: rope_scaling, quantization_config).
constexpr size_t kMaxJsonDepth = 64;

/// After the parse: nesting at most kMaxJsonDepth, and no key twice in one object (the parser
/// keeps the last silently, and a message would point at the first).
void check_structure(const std::shared_ptr<const Source>& src, const std::string& text) {
  struct Level {
    bool object = false, want_key = false;
    std::map<std::string, size_t> keys;  ///< key -> its offset
  };
  std::vector<Level> stack;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const size_t start = i;
      std::string s;
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) s += text[i++];
        s += text[i];
      }
      if (stack.empty() || !stack.back().object || !stack.back().want_key) continue;
      stack.back().want_key = false;
      const auto [it, fresh] = stack.back().keys.emplace(s, start);
      if (!fresh)
        fail(origin_at(src, text, start), "", "duplicate key \"" + s.substr(0, 64) + "\" (first at line " +
                                                  std::to_string(origin_at(src, text, it->second).line) +
                                                  "); a JSON reader keeps only one of them");
    } else if (c == '{' || c == '[') {
      if (stack.size() >= kMaxJsonDepth)
        fail(origin_at(src, text, i), "", "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
      stack.push_back(Level{c == '{', c == '{', {}});
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
    } else if (c == ',' && !stack.empty() && stack.back().object) {
      stack.back().want_key = true;
    }
  }
}

}  // namespace

JsonText parse_json(const std::string& text, const std::string& file) {
  auto src = std::make_shared<Source>();
  src->file = file;
  src->lines = split_lines(text);
  JsonText out{src, text, Json()};
  try {
    out.root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // what(): "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ..."
    std::string why = e.what();
    if (const size_t p = why.find(": "); p != std::string::npos) why = why.substr(p + 2);
    // e.byte is just past the token the parser choked on; point at the token's start.
    size_t at = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
    if (at < text.size() && text[at] == '"') {
      while (at > 0 && !(text[at - 1] == '"' && (at < 2 || text[at - 2] != '\\'))) --at;
      if (at > 0) --at;
    } else if (at < text.size() && std::isalnum(static_cast<unsigned char>(text[at]))) {
      while (at > 0 && text[at - 1] != '\0' &&
             (std::isalnum(static_cast<unsigned char>(text[at - 1])) || std::strchr(".+-", text[at - 1]) != nullptr))
        --at;
    }
    fail(origin_at(src, text, at), "", "invalid JSON: " + why);
  } catch (const Json::out_of_range& e) {
    // what(): "[json.exception.out_of_range.406] number overflow parsing '1e400'": point at it.
    const std::string why = e.what();
    const size_t q = why.find('\'');
    const std::string token = q == std::string::npos ? "" : why.substr(q + 1, why.rfind('\'') - q - 1);
    const size_t at = token.empty() ? std::string::npos : text.find(token);
    fail(at == std::string::npos ? Origin{src, 0, 0} : origin_at(src, text, at), "",
         "number out of range" + (token.empty() ? std::string() : ": " + token.substr(0, 64)) +
             " (beyond a double's 1.8e308)");
  }
  check_structure(src, text);
  return out;
}

void JsonObject::bad(const std::string& k, const std::string& msg) const { fail(locate(k), prefix_ + k, msg); }

void JsonObject::missing(const std::string& k, const std::string& why) const {
  fail(Origin{src_, 0, 0}, prefix_ + k, "missing; " + why);
}

int64_t JsonObject::num(const std::string& k, int64_t min, const std::string& why) {
  if (!has(k)) missing(k, why);
  return int_at(k, min);
}

std::optional<int64_t> JsonObject::opt_num(const std::string& k, int64_t min) {
  use(k);
  if (!has(k)) return std::nullopt;
  return int_at(k, min);
}

std::optional<bool> JsonObject::opt_bool(const std::string& k) {
  use(k);
  if (!has(k)) return std::nullopt;
  if (!j_.at(k).is_boolean()) bad(k, "expected true or false, got " + j_.at(k).dump());
  return j_.at(k).get<bool>();
}

std::optional<std::vector<int64_t>> JsonObject::opt_int_list(const std::string& k, int64_t min) {
  use(k);
  if (!has(k)) return std::nullopt;
  const Json& v = j_.at(k);
  if (!v.is_array()) bad(k, "expected a list of integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer() || e.get<int64_t>() < min)
      bad(k, "expected integers >= " + std::to_string(min) + ", got " + e.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::optional<std::vector<std::string>> JsonObject::opt_str_list(const std::string& k) {
  use(k);
  if (!has(k)) return std::nullopt;
  const Json& v = j_.at(k);
  if (!v.is_array()) bad(k, "expected a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) bad(k, "expected a list of strings, got " + e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::vector<std::string> JsonObject::unused() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : j_.items())
    if (!used_.count(k) && !v.is_null()) out.push_back(prefix_ + k);
  return out;
}

int64_t JsonObject::int_at(const std::string& k, int64_t min) {
  use(k);
  const Json& v = j_.at(k);
  if (!v.is_number_integer()) bad(k, "expected an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{std::numeric_limits<int32_t>::max()})
    bad(k, v.dump() + " is too large (at most 2147483647)");
  const int64_t n = v.get<int64_t>();
  if (n < min || n > std::numeric_limits<int32_t>::max())
    bad(k, "expected an integer >= " + std::to_string(min) + ", got " + v.dump());
  return n;
}

Origin JsonObject::locate(const std::string& k) const {
  // The first `"k":` after the object's start; JSON keys are unique per object, and the
  // importer reads the outer object's keys before descending.
  const std::string quoted = "\"" + k + "\"";
  for (size_t p = text_.find(quoted, from_); p != std::string::npos; p = text_.find(quoted, p + 1)) {
    size_t q = p + quoted.size();
    while (q < text_.size() && std::strchr(" \t\r\n", text_[q]) != nullptr && text_[q] != '\0') ++q;
    if (q < text_.size() && text_[q] == ':') return origin_at(src_, text_, p);
  }
  return Origin{src_, 0, 0};
}

}  // namespace cpsim::scenario::detail
