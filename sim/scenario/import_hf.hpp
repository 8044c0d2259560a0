#pragma once
/// Hugging Face `config.json` -> a cpsim model YAML document. The importer only writes text;
/// the model loader (build_model) then validates it like any model file, so an imported model
/// and a hand-written one go through the same checks.
///
/// Every config key is either mapped to a model key, or listed in `ignored` (printed by
/// `cpsim import hf` and kept in the document's `# ignored:` comment); nothing is guessed. A key
/// the mapping needs but the config lacks is an InputError naming the file and the key; bad
/// JSON is an InputError at file:line:col.
#include <string>
#include <vector>

namespace cpsim::scenario {

struct HfImport {
  std::string yaml;                  ///< the model YAML document
  std::string model_type;            ///< the config's model_type (of text_config when nested)
  std::vector<std::string> ignored;  ///< keys not used, in file order ("text_config.rope_theta")
  std::vector<std::string> notes;    ///< defaults taken from transformers where a key is absent
};

/// Reads and maps a config.json file.
HfImport import_hf(const std::string& path);

/// Maps config text; `file` names it in messages and gives the model its default name.
HfImport import_hf_text(const std::string& json_text, const std::string& file);

/// The model_type values the importer maps (for messages and docs).
const std::vector<std::string>& hf_model_types();

}  // namespace cpsim::scenario
