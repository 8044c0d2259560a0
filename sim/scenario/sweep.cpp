#include "scenario/sweep.hpp"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "scenario/builders.hpp"
#include "scenario/load.hpp"

namespace cpsim::scenario {
namespace detail {
namespace {

/// One varied key: its path split into segments pointing into the sweep file, and its values.
struct Axis {
  std::string key;
  const Node* key_node = nullptr;  ///< the list, whose key is the key path
  std::vector<PathSegment> segs;
  std::vector<Node> values;
};

/// A dimension of the expansion: one axis, or a zip group of axes varied together.
struct Dim {
  std::vector<Axis> axes;
  size_t size() const { return axes.front().values.size(); }
};

std::vector<PathSegment> split_key(const Node& list) {
  std::vector<PathSegment> segs;
  const std::string& key = list.key;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    const std::string seg = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Origin at = list.key_at;
    if (at.line > 0) at.col += static_cast<int>(start);
    if (seg.empty()) fail_key(list, "empty key in '" + key + "'");
    segs.push_back({seg, at});
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return segs;
}

/// Keys whose values name files: a relative path in a sweep is relative to the sweep file, so
/// it is made absolute before it becomes an override (which would resolve it from the cwd).
bool names_a_file(const std::string& key) {
  static const char* keys[] = {"platform", "platform.preset", "model", "model.preset", "cost.profile"};
  return std::find(std::begin(keys), std::end(keys), key) != std::end(keys);
}

Axis read_axis(const Node& list, const std::string& sweep_dir) {
  Axis a;
  a.key = list.key;
  a.key_node = &list;
  a.segs = split_key(list);
  if (!list.is_seq()) fail_at(list, "expected a list of values, got " + list.describe());
  if (list.children.empty()) fail_at(list, "expected at least one value");
  for (const auto& v : list.children) {
    a.values.push_back(v);
    Node& n = a.values.back();
    const bool path_like = n.is_scalar() && (n.scalar.find('/') != std::string::npos ||
                                             n.scalar.ends_with(".yaml") || n.scalar.ends_with(".yml") ||
                                             n.scalar.ends_with(".csv"));
    if (names_a_file(a.key) && path_like && !std::filesystem::path(n.scalar).is_absolute())
      n.scalar = std::filesystem::absolute(join_path(sweep_dir, n.scalar)).lexically_normal().string();
  }
  return a;
}

std::string pad_id(size_t i, size_t width) {
  std::string s = std::to_string(i);
  return std::string(width > s.size() ? width - s.size() : 0, '0') + s;
}

}  // namespace
}  // namespace detail

Sweep load_sweep_file(const std::string& path) {
  using namespace detail;
  const Node root = parse_file(path, nullptr, "sweep");
  MapReader r(root, {"name", "description", "base", "axes", "zip"});
  Sweep sweep;
  sweep.file = path;
  sweep.name = r.get("name") ? as_string(*r.get("name")) : file_stem(path);
  if (const Node* d = r.get("description")) as_string(*d);

  const Node& base_node = r.require("base");
  const std::string base_path = join_path(dir_of(path), as_string(base_node));
  const Node base = parse_file(base_path, &base_node, "base scenario");

  std::vector<Dim> dims;
  const Node* axes = r.get("axes");
  if (axes && !axes->is_map() && !axes->is_null())
    fail_at(*axes, "expected a mapping of key.path to a list of values, got " + axes->describe());
  if (axes)
    for (const auto& c : axes->children) dims.push_back(Dim{{read_axis(c, dir_of(path))}});
  if (const Node* zip = r.get("zip")) {
    if (!zip->is_seq() && !zip->is_null())
      fail_at(*zip, "expected a list of mappings {key.path: [values], ...}, got " + zip->describe());
    for (const auto& group : zip->children) {
      if (!group.is_map() || group.children.empty())
        fail_at(group, "expected a mapping of key.path to a list of values, got " + group.describe());
      Dim d;
      for (const auto& c : group.children) {
        d.axes.push_back(read_axis(c, dir_of(path)));
        if (d.axes.back().values.size() != d.axes.front().values.size())
          fail_at(c, "has " + std::to_string(d.axes.back().values.size()) + " values but '" +
                         d.axes.front().key + "' has " + std::to_string(d.axes.front().values.size()) +
                         "; lists in one zip group vary together and need equal lengths");
      }
      dims.push_back(std::move(d));
    }
  }

  // Each key varies in one place only.
  std::vector<const Axis*> all;
  for (const auto& d : dims)
    for (const auto& a : d.axes) {
      for (const Axis* prev : all)
        if (prev->key == a.key)
          fail_key(*a.key_node, "key '" + a.key + "' is already varied (line " +
                                    std::to_string(prev->key_node->key_at.line) + ")");
      all.push_back(&a);
    }

  size_t total = 1;
  for (const auto& d : dims) {
    if (total > kMaxSweepPoints / d.size())
      fail_key(*d.axes.front().key_node, "the sweep expands to more than " + std::to_string(kMaxSweepPoints) +
                                             " points");
    total *= d.size();
  }

  // Validate every value on its own (keys, types, units, presets) over the base with the first
  // value of every other key, so that a base may leave a key to the sweep. Errors point into the
  // sweep file because the segments and values do.
  Node first = base;
  for (const Axis* a : all) set_path(first, a->segs, a->values.front(), scenario_preset_paths());
  if (all.empty()) build_scenario(first, base_path, false);
  for (const Axis* a : all)
    for (const Node& v : a->values) {
      Node doc = first;
      set_path(doc, a->segs, v, scenario_preset_paths());
      build_scenario(doc, base_path, false);
    }

  size_t width = 4;
  for (size_t n = total > 0 ? total - 1 : 0; n >= 10000; n /= 10) ++width;
  sweep.points.reserve(total);
  std::vector<size_t> idx(dims.size(), 0);
  for (size_t i = 0; i < total; ++i) {
    // Row-major: the last dimension varies fastest.
    size_t rest = i;
    for (size_t d = dims.size(); d-- > 0;) {
      idx[d] = rest % dims[d].size();
      rest /= dims[d].size();
    }
    SweepPoint p;
    p.id = pad_id(i, width);
    p.base_path = base_path;
    for (size_t d = 0; d < dims.size(); ++d)
      for (const auto& a : dims[d].axes) {
        const std::string value = emit_flow(a.values[idx[d]]);
        p.overrides.push_back(a.key + "=" + value);
        p.values.emplace_back(a.key, value);
      }
    sweep.points.push_back(std::move(p));
  }
  return sweep;
}

std::vector<SweepPoint> load_sweep(const std::string& path) { return load_sweep_file(path).points; }

}  // namespace cpsim::scenario
