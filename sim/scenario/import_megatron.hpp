#pragma once
/// Megatron-LM / NeMo command-line arguments -> a cpsim scenario YAML document (written as text;
/// `cpsim check` / the scenario loader validate it like any scenario file).
///
/// Besides Megatron's own arguments it reads cpsim's `--platform P`, `--nodes N`,
/// `--model NAME|hf:config.json` and `--name NAME`, and NeMo's `trainer.num_nodes=N`,
/// `trainer.devices=G` and `model.<key>=<value>` overrides (as the Megatron argument of that
/// name). Arguments it does not use are returned in `not_understood`, never dropped silently.
/// Bad values throw InputError at the argument's column in the joined command line.
#include <string>
#include <vector>

namespace cpsim::scenario {

struct MegatronImport {
  std::string yaml;                        ///< the scenario document
  std::vector<std::string> not_understood; ///< arguments (with their values) cpsim does not use
  std::vector<std::string> notes;          ///< defaults taken and approximations made
};

/// `out_dir` is where the scenario will be written: an `hf:` model path is made relative to it
/// ("" = the current directory).
MegatronImport import_megatron(const std::vector<std::string>& args, const std::string& out_dir = "");

}  // namespace cpsim::scenario
