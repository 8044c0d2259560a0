// YAML text and files into the located tree (yaml_tree.hpp), from yaml-cpp's parse events, with
// the size, depth and node limits that keep a hostile file from exhausting the process.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"
#include "support/bounded_read.hpp"

namespace fs = std::filesystem;

namespace cpsim::scenario::detail {
namespace {

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxFileBytes = support::kMaxInputBytes;

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

}  // namespace

Node parse_yaml(const std::string& yaml, const std::shared_ptr<const Source>& src,
                const std::string& path_prefix) {
  // YAML allows no control characters but tab, line feed and carriage return in a stream
  // (YAML 1.2, c-printable). yaml-cpp kept a raw NUL inside a quoted scalar, and the value then
  // did not survive its own --set text (fuzz_sweep: the override's YAML ended at the NUL).
  int line = 1, col = 1;
  for (const char ch : yaml) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "%02X", c);
      // The excerpt shows such characters as '?': a NUL would end the message there.
      auto shown = std::make_shared<Source>(*src);
      for (std::string& l : shown->lines)
        for (char& x : l)
          if ((static_cast<unsigned char>(x) < 0x20 && x != '\t') || x == 0x7f) x = '?';
      fail(Origin{shown, line, col + src->col_offset}, "",
           std::string("invalid YAML: control character 0x") + code +
               " (only tab, line feed and carriage return are allowed; write it as an escape "
               "such as \\u0001 in a double-quoted string)");
    }
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  std::istringstream in(yaml);
  std::optional<Node> root;
  TreeBuilder first(src, path_prefix);
  try {
    YAML::Parser parser(in);
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
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp stops at 2,000 levels with "bad file"; the builder saw the first level too deep.
    first.rethrow();
    fail(origin_of(src, e.mark), "", "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
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
  // support/bounded_read.hpp: a regular file (a FIFO is refused, not waited on), at most 16 MiB.
  std::string why;
  const std::optional<std::string> text = support::read_regular_file(path, kMaxFileBytes, why);
  if (!text) fail_read(why);
  return parse_text(*text, path, dir_of(path));
}

}  // namespace cpsim::scenario::detail
