// Error messages of the scenario stage: "file:line:col: error: path: message", the quoted
// source line and a caret (yaml_tree.hpp), and the did-you-mean of unknown names.
#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "scenario/load.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {

std::string lower_norm(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '-' && c != '_') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

namespace {

/// Bytes of a source line shown under a message: a line longer than this (a minified file, a
/// 10 MB scalar) is cut to this many bytes around the column, marked with "..." at each cut.
constexpr size_t kExcerptBytes = 120;
constexpr const char kCut[] = "...";
/// A message quoting a value (a 10 MB scalar) is cut after this many bytes.
constexpr size_t kMessageBytes = 1000;

bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

/// The quoted line and the caret under column `col` (1-based; 0 = none): "\n  line\n  ^".
std::string excerpt(const std::string& line, int col) {
  const size_t c = col > 0 ? static_cast<size_t>(col - 1) : 0;
  size_t begin = 0, end = line.size();
  if (line.size() > kExcerptBytes) {
    // Centre the window on the column, inside the line (a column one past the end is the end).
    const size_t at = std::min(c, line.size());
    begin = at > kExcerptBytes / 2 ? at - kExcerptBytes / 2 : 0;
    begin = std::min(begin, line.size() - kExcerptBytes);
    end = begin + kExcerptBytes;
    // Never cut a UTF-8 character in two.
    while (begin > 0 && begin < line.size() && utf8_continuation(line[begin])) --begin;
    while (end < line.size() && utf8_continuation(line[end])) ++end;
  }
  std::string shown = begin > 0 ? kCut : "";
  shown.append(line, begin, end - begin);
  if (end < line.size()) shown += kCut;
  std::string pad(begin > 0 ? sizeof kCut - 1 : 0, ' ');
  for (size_t i = begin; i < std::min(c, end); ++i)
    pad.push_back(i < line.size() && line[i] == '\t' ? '\t' : ' ');
  return "\n  " + shown + "\n  " + pad + "^";
}

}  // namespace

std::string format_error(const Origin& at, const std::string& path, const std::string& message) {
  std::string s;
  if (at.src && !at.src->file.empty()) {
    s += at.src->file;
    if (at.line > 0) s += ":" + std::to_string(at.line) + ":" + std::to_string(at.col);
    s += ": ";
  }
  s += "error: ";
  if (!path.empty()) s += path + ": ";
  if (message.size() > kMessageBytes) {
    size_t cut = kMessageBytes;
    while (cut > 0 && utf8_continuation(message[cut])) --cut;
    s += message.substr(0, cut) + kCut + " (" + std::to_string(message.size()) + " bytes)";
  } else {
    s += message;
  }
  // A position one past the last line is the end of the text (yaml-cpp reports unclosed
  // brackets there): it is shown as an empty line.
  if (at.src && at.line > 0 && at.line <= static_cast<int>(at.src->lines.size()) + 1) {
    static const std::string kEnd;
    const std::string& line =
        at.line <= static_cast<int>(at.src->lines.size()) ? at.src->lines[at.line - 1] : kEnd;
    s += excerpt(line, at.col);
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
  const size_t limit = word.size() <= 4 ? 1 : word.size() <= 8 ? 2 : 3;
  std::optional<std::string> best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    const std::string cn = lower_norm(c);  // case and '-'/'_' do not count
    // The distance is at least the length difference: a 10 MB unknown value against the known
    // names would cost O(10 MB x name) time and memory per name for a certain "no".
    if (std::max(w.size(), cn.size()) - std::min(w.size(), cn.size()) > limit) continue;
    const size_t d = edit_distance(w, cn);
    if (d < best_d) best_d = d, best = c;
  }
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

}  // namespace cpsim::scenario::detail
