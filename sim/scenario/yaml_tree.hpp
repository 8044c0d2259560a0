#pragma once
/// Internal to the scenario stage: a YAML tree whose every node remembers the file, line and
/// column it came from, so that values deep-merged from presets and `--set` overrides still
/// report errors against their own source. yaml-cpp nodes cannot carry a file name, hence this
/// copy.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cpsim::scenario::detail {

/// One text the tree was read from: a file, or one `--set` override.
struct Source {
  std::string file;                ///< name used in messages ("s.yaml", "<--set>")
  std::string dir;                 ///< base directory for relative paths it names ("" = cwd)
  std::vector<std::string> lines;  ///< the text, for the quoted source line under a message
  int col_offset = 0;              ///< added to yaml-cpp columns (an override's value after '=')
};

/// A position in a Source; line and col are 1-based, 0 when unknown.
struct Origin {
  std::shared_ptr<const Source> src;
  int line = 0;
  int col = 0;
};

struct Node {
  enum class Kind { Null, Scalar, Sequence, Map };
  Kind kind = Kind::Null;
  std::string scalar;          ///< Scalar: the text as written (without quotes)
  bool quoted = false;         ///< Scalar: it was quoted in the source
  std::string key;             ///< child of a Map: its key
  std::vector<Node> children;  ///< Map entries (in source order) or Sequence items
  Origin at;                   ///< where the value starts (the key for an empty value)
  Origin key_at;               ///< child of a Map: where its key starts
  std::string path;            ///< yaml path inside its own source ("parallel.attention.scheme")

  bool is_null() const { return kind == Kind::Null; }
  bool is_scalar() const { return kind == Kind::Scalar; }
  bool is_seq() const { return kind == Kind::Sequence; }
  bool is_map() const { return kind == Kind::Map; }
  const Node* find(std::string_view k) const;
  Node* find(std::string_view k);
  /// For messages: the scalar in quotes, or "a mapping" / "a list" / "nothing".
  std::string describe() const;
};

/// Builds the full what() text: "file:line:col: error: path: message\n  line\n  ^".
std::string format_error(const Origin& at, const std::string& path, const std::string& message);

[[noreturn]] void fail(const Origin& at, const std::string& path, const std::string& message);
/// Error about a node's value.
[[noreturn]] void fail_at(const Node& n, const std::string& message);
/// Error about a node's key (unknown key, a value that should not be there).
[[noreturn]] void fail_key(const Node& n, const std::string& message);

/// A name given outside any file (a preset name or path on the command line) as a scalar node
/// of a one-line "document" called `file` ("<platform>"), so that errors about it have a place
/// to point at.
Node name_node(const std::string& name, const std::string& file);

/// Parses YAML text into a tree; syntax errors become InputError. An empty document is Null.
Node parse_text(const std::string& text, const std::string& file, const std::string& dir,
                const std::string& path_prefix = "");
/// Reads and parses a file; a missing or unreadable file throws InputError at `ref` (the key
/// that named the file), or with no location when `ref` is null.
Node parse_file(const std::string& path, const Node* ref, const std::string& what);

/// Applies one "key.path=value" override to `root`. Descending into a scalar at one of the
/// `preset_paths` turns it into {preset: scalar} so that `platform.nodes=4` works on
/// `platform: dgx-h100`. `file` names the override in messages ("<--set>").
void apply_override(Node& root, const std::string& text, const std::string& file,
                    const std::vector<std::string>& preset_paths);

/// One segment of a key path with where it was written.
struct PathSegment {
  std::string name;
  Origin at;
};
/// Sets `value` at the key path `segs` under `root`, creating mappings on the way (the core of
/// apply_override; sweeps call it with segments and values that point into the sweep file).
void set_path(Node& root, const std::vector<PathSegment>& segs, Node value,
              const std::vector<std::string>& preset_paths);

/// Deep merge: mappings merge key by key, anything else in `over` replaces `base`.
void merge_into(Node& base, const Node& over);

/// Levenshtein edit distance.
size_t edit_distance(std::string_view a, std::string_view b);
/// The closest candidate when it is close enough to be a likely typo.
std::optional<std::string> did_you_mean(const std::string& word,
                                        const std::vector<std::string>& candidates);
std::string join(const std::vector<std::string>& v, const std::string& sep = ", ");

/// A mapping whose keys are checked against the allowed set on construction (unknown keys are
/// errors with a did-you-mean). A Null node reads as an empty mapping.
class MapReader {
 public:
  MapReader(const Node& n, std::vector<std::string> allowed);
  const Node* get(std::string_view key) const;
  const Node& require(std::string_view key) const;
  const Node& node() const { return n_; }

 private:
  const Node& n_;
};

// Scalar readers; each throws InputError at the node with the expected form.
std::string as_string(const Node& n);
int64_t as_int(const Node& n, int64_t min, int64_t max);
uint64_t as_uint64(const Node& n);
double as_number(const Node& n);
bool as_bool(const Node& n);
double as_bytes(const Node& n);
double as_bandwidth(const Node& n);
double as_time(const Node& n);
double as_flops(const Node& n);
int64_t as_tokens(const Node& n);
/// Enum by name: case-insensitive, '-' and '_' ignored; the error lists the allowed names.
size_t as_choice(const Node& n, const std::vector<std::string>& names);

/// Value range checks that report against the node.
void check_min(const Node& n, double v, double min, bool inclusive);
void check_max(const Node& n, double v, double max, bool inclusive);

/// Flow-style YAML text of a node (for sweep overrides).
std::string emit_flow(const Node& n);

/// Where a preset or a path was looked up.
struct Resolved {
  std::string path;       ///< file to read
  bool preset = false;    ///< found as a preset name
};
/// Resolves `name` as a path (it contains '/' or ends in .yaml/.yml) relative to `base_dir`,
/// else as `<data_dir>/<subdir>/<name>.yaml`. Unknown presets throw at `ref` listing the known
/// ones and the directory searched; `kind` is "platform" or "model".
Resolved resolve_preset(const std::string& name, const std::string& base_dir,
                        const std::string& subdir, const std::string& kind, const Node* ref,
                        const std::vector<std::string>& excluded = {});

/// Stems of the *.yaml files in `dir`, sorted, without `excluded`.
std::vector<std::string> list_presets(const std::string& dir,
                                      const std::vector<std::string>& excluded = {});

// Shared by the yaml_*.cpp files of this stage.
/// "a.b" + "c" -> "a.b.c" ("" + "c" -> "c").
std::string join_yaml_path(const std::string& prefix, const std::string& key);
/// Lower case without '-' and '_': how names are compared (as_choice, did_you_mean).
std::string lower_norm(std::string_view s);
/// Parses YAML text read from `src` (yaml_parse.cpp); paths start at `path_prefix`.
Node parse_yaml(const std::string& yaml, const std::shared_ptr<const Source>& src,
                const std::string& path_prefix);

std::string file_stem(const std::string& path);
std::string dir_of(const std::string& path);
std::string join_path(const std::string& dir, const std::string& rel);

}  // namespace cpsim::scenario::detail
