#include "scenario/yaml_tree.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

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

constexpr size_t kMaxDepth = 64;
constexpr std::uintmax_t kMaxFileBytes = 16u << 20;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      if (!cur.empty() && cur.back() == '\r') cur.pop_back();
      lines.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) lines.push_back(std::move(cur));
  return lines;
}

std::string fmt_num(double v) {
  std::ostringstream o;
  o.precision(15);
  o << v;
  return o.str();
}

std::string join_yaml_path(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

Origin origin_of(const std::shared_ptr<const Source>& src, const YAML::Mark& m) {
  Origin o;
  o.src = src;
  if (m.line >= 0 && m.column >= 0) {
    o.line = m.line + 1;
    o.col = m.column + 1 + (m.line == 0 ? src->col_offset : 0);
  }
  return o;
}

/// Builds the tree straight from yaml-cpp's parse events (YAML::LoadAll loops forever on some
/// malformed input, yaml-cpp issue #1040, and YAML::Load silently returns an empty document).
class TreeBuilder : public YAML::EventHandler {
 public:
  TreeBuilder(std::shared_ptr<const Source> src, std::string prefix)
      : src_(std::move(src)), prefix_(std::move(prefix)) {}

  bool done() const { return root_.has_value(); }
  /// The first problem found, reported once yaml-cpp has parsed the whole document, so that a
  /// syntax error (which yaml-cpp reports late) wins over what its partial events looked like.
  void rethrow() const {
    if (broken_) fail(err_at_, err_path_, err_msg_);
  }
  Node take() { return std::move(*root_); }
  const Origin& start() const { return start_; }

  void OnDocumentStart(const YAML::Mark& m) override { start_ = origin_of(src_, m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t a) override {
    if (!broken_) add(leaf(m, Node::Kind::Null), a);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t a) override {
    if (broken_) return;
    auto it = anchors_.find(a);
    if (it == anchors_.end()) return error(origin_of(src_, m), "", "invalid YAML: unknown alias");
    if (!count(size_of(it->second), origin_of(src_, m))) return;
    Node n = it->second;
    nodes_ -= 1;  // add() counts the copy's root again
    add(std::move(n), 0);
  }
  void OnScalar(const YAML::Mark& m, const std::string& tag, YAML::anchor_t a,
                const std::string& value) override {
    if (broken_) return;
    Node n = leaf(m, Node::Kind::Scalar);
    n.scalar = value;
    n.quoted = tag == "!";
    add(std::move(n), a);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                       YAML::EmitterStyle::value) override {
    if (!broken_) push(leaf(m, Node::Kind::Sequence), a);
  }
  void OnSequenceEnd() override {
    if (!broken_) pop();
  }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t a,
                  YAML::EmitterStyle::value) override {
    if (!broken_) push(leaf(m, Node::Kind::Map), a);
  }
  void OnMapEnd() override {
    if (!broken_) pop();
  }

 private:
  struct Frame {
    Node node;
    YAML::anchor_t anchor = 0;
    bool has_key = false;  ///< a Map frame that read a key and waits for its value
    Node key;
  };

  static size_t size_of(const Node& n) {
    size_t k = 1;
    for (const auto& c : n.children) k += size_of(c);
    return k;
  }

  void error(const Origin& at, const std::string& path, const std::string& msg) {
    if (broken_) return;
    broken_ = true;
    err_at_ = at;
    err_path_ = path;
    err_msg_ = msg;
  }

  bool count(size_t k, const Origin& at) {
    nodes_ += k;
    if (nodes_ > kMaxNodes)
      error(at, "", "the document expands to more than " + std::to_string(kMaxNodes) + " values (aliases?)");
    return !broken_;
  }

  Node leaf(const YAML::Mark& m, Node::Kind kind) {
    Node n;
    n.kind = kind;
    n.at = origin_of(src_, m);
    return n;
  }

  /// Gives `n` its place under the innermost open container: key, path, index. Returns false
  /// when `n` is a mapping key (kept until its value arrives).
  bool place(Node& n) {
    if (stack_.empty()) {
      n.path = prefix_;
      return true;
    }
    Frame& f = stack_.back();
    if (f.node.is_seq()) {
      n.path = f.node.path + "[" + std::to_string(f.node.children.size()) + "]";
      return true;
    }
    if (!f.has_key) {
      if (!n.is_scalar()) {
        error(n.at, f.node.path, n.is_null() ? "empty mapping key" : "mapping keys must be plain text, not " + n.describe());
        return false;
      }
      if (const Node* prev = f.node.find(n.scalar)) {
        error(n.at, join_yaml_path(f.node.path, n.scalar),
              "duplicate key '" + n.scalar + "' (first given on line " + std::to_string(prev->key_at.line) + ")");
        return false;
      }
      f.key = std::move(n);
      f.has_key = true;
      return false;
    }
    n.key = f.key.scalar;
    n.key_at = f.key.at;
    n.path = join_yaml_path(f.node.path, n.key);
    if (n.is_null()) n.at = n.key_at;  // yaml-cpp marks an empty value at the next token
    return true;
  }

  void attach(Node n, YAML::anchor_t a) {
    if (a != 0) anchors_[a] = n;
    if (stack_.empty()) {
      root_ = std::move(n);
      return;
    }
    Frame& f = stack_.back();
    f.has_key = false;
    f.node.children.push_back(std::move(n));
  }

  void add(Node n, YAML::anchor_t a) {
    if (!count(1, n.at) || !place(n)) return;
    attach(std::move(n), a);
  }

  void push(Node n, YAML::anchor_t a) {
    if (!count(1, n.at)) return;
    if (stack_.size() >= kMaxDepth)
      return error(n.at, "", "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
    if (!place(n)) return error(n.at, stack_.back().node.path, "mapping keys must be plain text, not " + n.describe());
    stack_.push_back(Frame{std::move(n), a, false, Node{}});
  }

  void pop() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    attach(std::move(f.node), f.anchor);
  }

  static constexpr size_t kMaxNodes = 1'000'000;
  std::shared_ptr<const Source> src_;
  std::string prefix_;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, Node> anchors_;
  std::optional<Node> root_;
  Origin start_;
  size_t nodes_ = 0;
  bool broken_ = false;
  Origin err_at_;
  std::string err_path_, err_msg_;
};

Node parse_yaml(const std::string& yaml, const std::shared_ptr<const Source>& src,
                const std::string& path_prefix) {
  std::istringstream in(yaml);
  std::optional<Node> root;
  try {
    YAML::Parser parser(in);
    TreeBuilder first(src, path_prefix);
    const bool any = parser.HandleNextDocument(first);
    first.rethrow();
    if (any && first.done()) root = first.take();
    TreeBuilder second(src, path_prefix);
    if (root && parser.HandleNextDocument(second)) {
      // A stray ',', ']' or '}' is a token yaml-cpp cannot place; it would yield empty documents
      // there forever. Anything else is a second document.
      const Origin at = second.start();
      const std::string* line = at.line >= 1 && at.line <= static_cast<int>(src->lines.size())
                                    ? &src->lines[at.line - 1]
                                    : nullptr;
      const size_t col = at.col >= 1 ? static_cast<size_t>(at.col - 1) : 0;
      if (line != nullptr && col < line->size() && std::strchr(",]}", (*line)[col]) != nullptr)
        fail(at, "", "invalid YAML: unexpected '" + line->substr(col, 1) + "'");
      fail(at, "", "expected one YAML document, found more (remove the '---')");
    }
  } catch (const YAML::Exception& e) {
    fail(origin_of(src, e.mark), "", "invalid YAML: " + e.msg);
  }
  if (!root || root->is_null()) {
    Node n;
    n.at = Origin{src, 1, 1 + src->col_offset};
    n.path = path_prefix;
    return n;
  }
  return std::move(*root);
}

bool is_path_like(const std::string& name) {
  auto ends_with = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return name.find('/') != std::string::npos || ends_with(".yaml") || ends_with(".yml");
}

std::string lower_norm(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
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
    case Kind::Scalar: return "'" + scalar + "'";
    case Kind::Sequence: return "a list";
    case Kind::Map: return "a mapping";
    default: return "nothing";
  }
}

std::string format_error(const Origin& at, const std::string& path, const std::string& message) {
  std::string s;
  if (at.src && !at.src->file.empty()) {
    s += at.src->file;
    if (at.line > 0) s += ":" + std::to_string(at.line) + ":" + std::to_string(at.col);
    s += ": ";
  }
  s += "error: ";
  if (!path.empty()) s += path + ": ";
  s += message;
  // A position one past the last line is the end of the text (yaml-cpp reports unclosed
  // brackets there): it is shown as an empty line.
  if (at.src && at.line > 0 && at.line <= static_cast<int>(at.src->lines.size()) + 1) {
    static const std::string kEnd;
    const std::string& line =
        at.line <= static_cast<int>(at.src->lines.size()) ? at.src->lines[at.line - 1] : kEnd;
    std::string pad;
    for (int i = 0; i + 1 < at.col; ++i)
      pad.push_back(i < static_cast<int>(line.size()) && line[i] == '\t' ? '\t' : ' ');
    s += "\n  " + line + "\n  " + pad + "^";
  }
  return s;
}

void fail(const Origin& at, const std::string& path, const std::string& message) {
  throw InputError(format_error(at, path, message), at.src ? at.src->file : std::string(), at.line,
                   at.col, path, message);
}

void fail_at(const Node& n, const std::string& message) { fail(n.at, n.path, message); }

void fail_key(const Node& n, const std::string& message) {
  fail(n.key_at.src ? n.key_at : n.at, n.path, message);
}

Node parse_text(const std::string& text, const std::string& file, const std::string& dir,
                const std::string& path_prefix) {
  auto src = std::make_shared<Source>();
  src->file = file;
  src->dir = dir;
  src->lines = split_lines(text);
  return parse_yaml(text, src, path_prefix);
}

Node parse_file(const std::string& path, const Node* ref, const std::string& what) {
  auto fail_read = [&](const std::string& why) {
    if (ref != nullptr) {
      std::string msg = "cannot read " + what + " file '" + path + "'";
      fail_at(*ref, msg + ": " + why);
    }
    auto src = std::make_shared<Source>();
    src->file = path;
    fail(Origin{src, 0, 0}, "", "cannot read " + what + " file: " + why);
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail_read("it is a directory");
  // ELOOP (a symlink loop) and EACCES say more than "No such file or directory".
  if (!fs::exists(path, ec)) fail_read(ec ? ec.message() : std::strerror(ENOENT));
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxFileBytes) fail_read("larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_read(std::strerror(errno));
  // Counted as read too: a device or a pipe has no size to check first (/dev/zero never ends).
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) fail_read("larger than 16 MiB");
  }
  return parse_text(text, path, dir_of(path));
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

size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus adjacent transpositions ("shceme" -> "scheme").
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::optional<std::string> did_you_mean(const std::string& word,
                                        const std::vector<std::string>& candidates) {
  const std::string w = lower_norm(word);
  std::optional<std::string> best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    const size_t d = edit_distance(w, lower_norm(c));  // case and '-'/'_' do not count
    if (d < best_d) best_d = d, best = c;
  }
  const size_t limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  if (best && best_d <= limit && best_d < word.size()) return best;
  return std::nullopt;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += sep;
    out += v[i];
  }
  return out;
}

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

std::string emit_flow(const Node& n) {
  auto scalar = [](const std::string& s, bool quoted) {
    const bool plain_ok =
        !quoted && !s.empty() && s.find_first_of(":#,[]{}&*!|>'\"%@`\n\t") == std::string::npos &&
        s.front() != ' ' && s.back() != ' ' && s.front() != '-' && s.front() != '?';
    const bool negative_number = !quoted && s.size() > 1 && s.front() == '-' &&
                                 std::isdigit(static_cast<unsigned char>(s[1])) &&
                                 s.find_first_of(":#,[]{}") == std::string::npos;
    if (plain_ok || negative_number) return s;
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') out.push_back('\\');
      if (c == '\n') {
        out += "\\n";
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
