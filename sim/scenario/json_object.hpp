#pragma once
/// Internal to the scenario stage: JSON config files (Hugging Face config.json) read key by key.
/// nlohmann-json keeps no positions, so errors about a key find the key's text in the source to
/// report file:line:col like the YAML loader does; syntax errors point at the offending token.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {

using Json = nlohmann::ordered_json;

struct JsonText {
  std::shared_ptr<const Source> src;  ///< for messages (file name, quoted source lines)
  std::string text;
  Json root;
};

/// Parses JSON text; a syntax error throws InputError at file:line:col of the offending token.
JsonText parse_json(const std::string& text, const std::string& file);

/// One JSON object of a config (the root, or a nested one such as `text_config` whose text
/// starts at byte `from`), remembering which keys were read. `prefix` is put before key names
/// in messages ("text_config.").
class JsonObject {
 public:
  JsonObject(const Json& j, std::shared_ptr<const Source> src, const std::string& text, size_t from,
             std::string prefix)
      : j_(j), src_(std::move(src)), text_(text), from_(from), prefix_(std::move(prefix)) {}

  /// Present and not null.
  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }
  /// Marks a key as used without reading it (it was looked at and does not matter).
  void use(const std::string& k) { used_.insert(k); }

  /// Errors: about a present key's value (at its line:col), or a missing key (the file only).
  [[noreturn]] void bad(const std::string& k, const std::string& msg) const;
  [[noreturn]] void missing(const std::string& k, const std::string& why) const;

  /// A required integer >= min (and <= 2^31 - 1); `why` says what it is needed for.
  int64_t num(const std::string& k, int64_t min, const std::string& why);
  std::optional<int64_t> opt_num(const std::string& k, int64_t min);
  std::optional<bool> opt_bool(const std::string& k);
  std::optional<std::vector<int64_t>> opt_int_list(const std::string& k, int64_t min);
  std::optional<std::vector<std::string>> opt_str_list(const std::string& k);

  /// Keys with a (non-null) value that nothing read, in file order, with the prefix.
  std::vector<std::string> unused() const;

 private:
  int64_t int_at(const std::string& k, int64_t min);
  Origin locate(const std::string& k) const;

  const Json& j_;
  std::shared_ptr<const Source> src_;
  const std::string& text_;
  size_t from_;
  std::string prefix_;
  std::set<std::string> used_;
};

}  // namespace cpsim::scenario::detail
