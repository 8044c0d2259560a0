// Preset references: names, paths and {preset: NAME, ...overrides} mappings.
#include "scenario/builders.hpp"

namespace cpsim::scenario::detail {
namespace {

constexpr int kMaxPresetDepth = 8;

Node expand(const Node& tree, const RefKind& k, std::string* file_out, int depth) {
  if (!tree.is_map()) return tree;
  const Node* p = tree.find("preset");
  if (p == nullptr) return tree;
  if (!p->is_scalar())
    fail_at(*p, "expected a " + k.kind + " preset name or a path to a .yaml file, got " + p->describe());
  Node base = resolve_ref(*p, k, file_out, depth + 1);
  if (!base.is_map()) fail_at(base, "expected a mapping, got " + base.describe());
  Node over = tree;
  std::erase_if(over.children, [](const Node& c) { return c.key == "preset"; });
  // `gpu: {memory: 94GB}` over a preset's `gpu: h100-sxm` amends that GPU, not replaces it.
  for (const auto& key : k.nested_refs) {
    Node* b = base.find(key);
    const Node* o = over.find(key);
    if (b != nullptr && o != nullptr && b->is_scalar() && o->is_map() && o->find("preset") == nullptr) {
      Node name = *b;
      name.key = "preset";
      b->kind = Node::Kind::Map;
      b->scalar.clear();
      b->children = {name};
    }
  }
  merge_into(base, over);
  return base;
}

}  // namespace

const RefKind& platform_ref() {
  static const RefKind k{"platforms", "platform", {"gpus"}, {"gpu"}};
  return k;
}

const RefKind& model_ref() {
  static const RefKind k{"scenarios/models", "model", {}, {}};
  return k;
}

Node resolve_ref(const Node& ref, const RefKind& k, std::string* file_out, int depth) {
  if (depth > kMaxPresetDepth)
    fail_at(ref, "presets nested deeper than " + std::to_string(kMaxPresetDepth) +
                     " levels (does a preset name itself?)");
  if (ref.is_scalar() && &k == &model_ref() && ref.scalar.starts_with("hf:")) return hf_model_tree(ref, file_out);
  if (ref.is_scalar()) {
    const std::string base_dir = ref.at.src ? ref.at.src->dir : std::string();
    const Resolved r = resolve_preset(ref.scalar, base_dir, k.subdir, k.kind, &ref, k.excluded);
    Node tree = parse_file(r.path, &ref, k.kind);
    if (file_out != nullptr && file_out->empty()) *file_out = r.path;
    return expand(tree, k, file_out, depth);
  }
  if (ref.is_map()) return expand(ref, k, file_out, depth);
  fail_at(ref, "expected a " + k.kind + " preset name, a path to a .yaml file, or a mapping; got " +
                   ref.describe());
}

const std::vector<std::string>& scenario_preset_paths() {
  static const std::vector<std::string> p = {"platform", "model", "platform.gpu"};
  return p;
}

const std::vector<std::string>& platform_preset_paths() {
  static const std::vector<std::string> p = {"gpu"};
  return p;
}

}  // namespace cpsim::scenario::detail
