#pragma once
/// Internal to the scenario stage: trees -> validated specs.
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/specs.hpp"
#include "scenario/yaml_tree.hpp"

namespace cpsim::scenario::detail {

/// GPUs a platform or a parallel degree may name: the loaders' bound before any work.
inline constexpr int64_t kMaxGpus = 1'000'000;

/// What a reference names: platforms live in platforms/, models in scenarios/models/.
struct RefKind {
  std::string subdir;                 ///< under data_dir()
  std::string kind;                   ///< "platform", "model" (for messages)
  std::vector<std::string> excluded;  ///< stems in subdir that are not presets
  std::vector<std::string> nested_refs;  ///< keys that are themselves preset references ("gpu")
};
const RefKind& platform_ref();
const RefKind& model_ref();

/// A reference node (a preset name, a path, or a mapping with an optional `preset:` key whose
/// other keys deep-merge over the preset) -> the merged tree without any `preset:` key.
/// `file_out` receives the first file read (left as is when nothing was read).
Node resolve_ref(const Node& ref, const RefKind& kind, std::string* file_out, int depth = 0);

/// `model: hf:path/to/config.json`: the Hugging Face config converted to a model tree
/// (import_hf.cpp); the path is relative to the file holding `ref`.
Node hf_model_tree(const Node& ref, std::string* file_out);

/// For the importers' YAML text, where names, file names, JSON keys and arguments come from the
/// user and must stay data: a scalar, plain when it is a simple name, else double-quoted by
/// yaml-cpp's emitter (a newline is written \n, never a line of its own); a comment's text with
/// every control character escaped (so it cannot end the comment line); and "# head: a, b, ..."
/// comment lines, wrapped near 100 columns, their items escaped.
std::string yaml_scalar(const std::string& s);
std::string comment_text(const std::string& s);
std::string comment_lines(const std::string& head, const std::vector<std::string>& items);

PlatformSpec build_platform(const Node& tree, const std::string& file,
                            const std::string& default_name);
ModelSpec build_model(const Node& tree, const std::string& default_name);

/// Key paths where a scenario holds a preset reference (`--set platform.nodes=4` turns
/// `platform: NAME` into `{preset: NAME, nodes: 4}`).
const std::vector<std::string>& scenario_preset_paths();
/// The same for a platform file.
const std::vector<std::string>& platform_preset_paths();

/// Validates a scenario tree. `cross_checks` = false skips the checks that relate several keys
/// (GPU count, divisibility, document sums), for validating one sweep value at a time.
Scenario build_scenario(const Node& root, const std::string& file, bool cross_checks);

/// The scenario's `perturb:` mapping against its platform (perturb_keys.cpp); `rank_keys`
/// collects the nodes naming GPU ranks, for the cross-checks against the mesh.
PerturbSpec read_perturb(const Node& n, const PlatformSpec& plat, std::vector<const Node*>& rank_keys);

}  // namespace cpsim::scenario::detail
