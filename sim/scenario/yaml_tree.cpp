// The located YAML tree (yaml_tree.hpp): nodes, `--set` overrides, merges, flow text, preset
// and path lookup. Parsing is in yaml_parse.cpp, messages in yaml_error.cpp, the scalar
// readers in yaml_read.cpp.
#include "scenario/yaml_tree.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "scenario/load.hpp"

namespace fs = std::filesystem;

namespace cpsim::scenario {

std::string data_dir() {
  if (const char* env = std::getenv("CPSIM_DATA_DIR"); env != nullptr && *env != '\0') return env;
#ifdef CPSIM_SOURCE_DIR
  return CPSIM_SOURCE_DIR;
#else
  return ".";
#endif
}

namespace detail {
namespace {

bool is_path_like(const std::string& name) {
  auto ends_with = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return name.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// Rewrites the yaml paths of a subtree placed at `path`.
void repath(Node& n, const std::string& path) {
  n.path = path;
  size_t i = 0;
  for (auto& c : n.children) {
    repath(c, n.is_map() ? join_yaml_path(path, c.key) : path + "[" + std::to_string(i) + "]");
    ++i;
  }
}

}  // namespace

std::string join_yaml_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

const Node* Node::find(std::string_view k) const {
  for (const auto& c : children)
    if (c.key == k) return &c;
  return nullptr;
}

Node* Node::find(std::string_view k) {
  for (auto& c : children)
    if (c.key == k) return &c;
  return nullptr;
}

std::string Node::describe() const {
  switch (kind) {
    // A scalar can be a whole file that is not YAML (a --platform /etc/passwd): a long one is
    // described, never pasted into the message.
    case Kind::Scalar: return scalar.size() <= 60 ? "'" + scalar + "'" : "a text of " + std::to_string(scalar.size()) + " characters";
    case Kind::Sequence: return "a list";
    case Kind::Map: return "a mapping";
    default: return "nothing";
  }
}

Node name_node(const std::string& name, const std::string& file) {
  auto src = std::make_shared<Source>();
  src->file = file;
  src->lines = {name};
  Node n;
  n.kind = Node::Kind::Scalar;
  n.scalar = name;
  n.at = Origin{src, 1, 1};
  return n;
}

void apply_override(Node& root, const std::string& text, const std::string& file,
                    const std::vector<std::string>& preset_paths) {
  auto src = std::make_shared<Source>();
  src->file = file;
  src->lines = {text};
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    fail(Origin{src, 1, 1}, "", "expected key.path=value, got '" + text + "'");
  const std::string key = text.substr(0, eq);

  std::vector<PathSegment> segs;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    const std::string seg = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const Origin at{src, 1, static_cast<int>(start) + 1};
    if (seg.empty()) fail(at, "", "empty key in '" + key + "'");
    if (std::any_of(seg.begin(), seg.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
      fail(at, "", "spaces are not allowed in the key path '" + key + "'");
    segs.push_back({seg, at});
    if (dot == std::string::npos) break;
    start = dot + 1;
  }

  auto vsrc = std::make_shared<Source>(*src);
  vsrc->col_offset = static_cast<int>(eq) + 1;
  Node value = parse_yaml(text.substr(eq + 1), vsrc, key);  // "key=" is Null, just after '='
  set_path(root, segs, std::move(value), preset_paths);
}

void set_path(Node& root, const std::vector<PathSegment>& segs, Node value,
              const std::vector<std::string>& preset_paths) {
  if (root.is_null()) root.kind = Node::Kind::Map;
  Node* cur = &root;
  std::string logical;  // path from the document root, as the override wrote it
  for (size_t i = 0; i < segs.size(); ++i) {
    const PathSegment& seg = segs[i];
    const bool last = i + 1 == segs.size();
    const std::string here = join_yaml_path(logical, seg.name);

    if (cur->is_scalar() &&
        std::find(preset_paths.begin(), preset_paths.end(), logical) != preset_paths.end()) {
      // `platform: dgx-h100` + `platform.nodes=4` -> {preset: dgx-h100, nodes: 4}
      Node preset = *cur;
      preset.key = "preset";
      preset.key_at = cur->at;
      cur->kind = Node::Kind::Map;
      cur->scalar.clear();
      cur->quoted = false;
      cur->children.clear();
      cur->children.push_back(std::move(preset));
    }
    if (cur->is_null()) cur->kind = Node::Kind::Map;

    Node* next = nullptr;
    if (cur->is_seq()) {
      if (!all_digits(seg.name))
        fail(seg.at, here, "cannot set '" + seg.name + "': '" + logical + "' is a list (use an index)");
      const size_t idx = std::strtoul(seg.name.c_str(), nullptr, 10);
      if (idx >= cur->children.size())
        fail(seg.at, here, "index " + seg.name + " is out of range for '" + logical + "' (" +
                               std::to_string(cur->children.size()) + " items)");
      next = &cur->children[idx];
    } else if (cur->is_map()) {
      next = cur->find(seg.name);
      if (next == nullptr) {
        Node created;
        created.kind = Node::Kind::Map;
        created.key = seg.name;
        created.key_at = seg.at;
        created.at = seg.at;
        created.path = here;
        cur->children.push_back(std::move(created));
        next = &cur->children.back();
      }
    } else {
      fail(seg.at, here,
           "cannot set '" + seg.name + "': '" + logical + "' is " + cur->describe() + ", not a mapping");
    }

    if (last) {
      const bool in_map = cur->is_map();
      *next = std::move(value);
      next->key = in_map ? seg.name : std::string();
      next->key_at = in_map ? seg.at : Origin{};
      if (!next->at.src) next->at = seg.at;
      repath(*next, here);
      return;
    }
    cur = next;
    logical = here;
  }
}

void merge_into(Node& base, const Node& over) {
  if (base.is_map() && over.is_map()) {
    for (const auto& c : over.children) {
      if (Node* b = base.find(c.key)) {
        merge_into(*b, c);
      } else {
        base.children.push_back(c);
      }
    }
    return;
  }
  base = over;
}

std::string emit_flow(const Node& n) {
  auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  auto scalar = [&control](const std::string& s, bool quoted) {
    const bool plain_ok =
        !quoted && !s.empty() && s.find_first_of(":#,[]{}&*!|>'\"%@`\n\t") == std::string::npos &&
        std::none_of(s.begin(), s.end(), control) &&
        s.front() != ' ' && s.back() != ' ' && s.front() != '-' && s.front() != '?';
    const bool negative_number = !quoted && s.size() > 1 && s.front() == '-' &&
                                 std::isdigit(static_cast<unsigned char>(s[1])) &&
                                 s.find_first_of(":#,[]{}") == std::string::npos &&
                                 std::none_of(s.begin(), s.end(), control);
    if (plain_ok || negative_number) return s;
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      if (c == '\n') {
        out += "\\n";
        continue;
      }
      // The parser takes no raw control character (parse_yaml): escaped, \x01 reads back as 0x01.
      if (control(c)) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\x%02X", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += esc;
        continue;
      }
      out.push_back(c);
    }
    return out + "\"";
  };
  switch (n.kind) {
    case Node::Kind::Scalar: return scalar(n.scalar, n.quoted);
    case Node::Kind::Sequence: {
      std::vector<std::string> items;
      for (const auto& c : n.children) items.push_back(emit_flow(c));
      return "[" + join(items) + "]";
    }
    case Node::Kind::Map: {
      std::vector<std::string> items;
      for (const auto& c : n.children) items.push_back(scalar(c.key, false) + ": " + emit_flow(c));
      return "{" + join(items) + "}";
    }
    default: return "~";
  }
}

std::vector<std::string> list_presets(const std::string& dir, const std::vector<std::string>& excluded) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".yaml") continue;
    const std::string stem = p.stem().string();
    if (std::find(excluded.begin(), excluded.end(), stem) == excluded.end()) names.push_back(stem);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Resolved resolve_preset(const std::string& name, const std::string& base_dir,
                        const std::string& subdir, const std::string& kind, const Node* ref,
                        const std::vector<std::string>& excluded) {
  auto fail_here = [&](const std::string& msg) {
    fail(ref ? ref->at : Origin{}, ref ? ref->path : std::string(), msg);
  };
  if (name.empty()) fail_here("expected a " + kind + " preset name or a path to a .yaml file");
  if (is_path_like(name)) return {join_path(base_dir, name), false};
  const std::string dir = join_path(data_dir(), subdir);
  const std::string file = join_path(dir, name + ".yaml");
  std::error_code ec;
  const bool excluded_name = std::find(excluded.begin(), excluded.end(), name) != excluded.end();
  if (!excluded_name && fs::is_regular_file(file, ec)) return {file, true};
  const auto known = list_presets(dir, excluded);
  std::string msg = "unknown " + kind + " preset '" + name + "'; known: " +
                    (known.empty() ? std::string("none") : join(known)) + " (searched " + dir + "/)";
  if (auto s = did_you_mean(name, known)) msg += "; did you mean '" + *s + "'?";
  fail(ref ? ref->at : Origin{}, ref ? ref->path : std::string(), msg);
}

std::string file_stem(const std::string& path) { return fs::path(path).stem().string(); }

std::string dir_of(const std::string& path) { return fs::path(path).parent_path().string(); }

std::string join_path(const std::string& dir, const std::string& rel) {
  if (dir.empty() || fs::path(rel).is_absolute()) return rel;
  return (fs::path(dir) / rel).lexically_normal().string();
}

}  // namespace detail
}  // namespace cpsim::scenario
