// `cpsim import hf` and `cpsim import megatron`: the configs users already have, written as
// cpsim model and scenario YAML. What was not used goes to stderr, the YAML to stdout or -o.
#include <iostream>
#include <memory>

#include "app/command_errors.hpp"
#include "app/commands.hpp"
#include "scenario/builders.hpp"
#include "scenario/import_hf.hpp"
#include "scenario/import_megatron.hpp"
#include "scenario/load.hpp"
#include "support/safe_write.hpp"

namespace cpsim::app {
namespace {

/// Writes `text` to `path` (support/safe_write.hpp: a private temporary, synced and renamed, so a
/// full disk leaves the previous file whole), or to stdout when empty (checked at exit by
/// support::finish_stdout).
void emit(const std::string& text, const std::string& path) {
  if (path.empty()) std::cout << text;
  else support::write_file_atomic(path, text);
}

void list(const std::string& head, const std::vector<std::string>& items) {
  if (items.empty()) return;
  std::cerr << head << " (" << items.size() << "):";
  for (size_t i = 0; i < items.size(); ++i) std::cerr << (i ? ", " : " ") << scenario::detail::comment_text(items[i]);
  std::cerr << "\n";
}

/// The files Megatron arguments read (--model hf:FILE, a --platform file), so that -o never
/// names one of them.
std::vector<support::NamedPath> megatron_inputs(const std::vector<std::string>& args) {
  std::vector<support::NamedPath> in;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    const std::string v = args[i + 1];
    if (args[i] == "--model" && v.starts_with("hf:")) in.push_back({"--model", v.substr(3)});
    if (args[i] == "--model" || args[i] == "--platform") in.push_back({args[i], v});
  }
  return in;
}

}  // namespace

void register_import(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("import", "write cpsim YAML from a Hugging Face config.json or Megatron-LM arguments");
  cmd->require_subcommand(1);

  struct HfArgs {
    std::string config, output;
  };
  auto hf_args = std::make_shared<HfArgs>();
  auto* hf = cmd->add_subcommand("hf", "print the cpsim model YAML of a Hugging Face config.json");
  hf->add_option("config", hf_args->config, "the model's config.json")->required();
  hf->add_option("-o,--output", hf_args->output, "write the model YAML to this file instead of stdout");
  hf->callback([hf_args, &rc] {
    rc = report_errors("import hf", "", [&] {
      // Checked before the work: -o naming the config (or a directory) would destroy it.
      support::check_outputs({{"-o", hf_args->output}}, {{"config", hf_args->config}});
      const scenario::HfImport imp = scenario::import_hf(hf_args->config);
      list("note: ignored fields", imp.ignored);
      for (const auto& n : imp.notes) std::cerr << "note: " << n << "\n";
      emit(imp.yaml, hf_args->output);
      return 0;
    });
  });

  struct MegatronArgs {
    std::vector<std::string> args;
    std::string output;
  };
  auto mg_args = std::make_shared<MegatronArgs>();
  auto* mg = cmd->add_subcommand(
      "megatron", "write the scenario that Megatron-LM / NeMo arguments describe: cpsim import megatron [-o FILE] -- ARGS");
  mg->add_option("-o,--output", mg_args->output, "write the scenario to this file instead of stdout");
  mg->add_option("args", mg_args->args,
                 "Megatron-LM arguments (--tensor-model-parallel-size 2 ...), NeMo overrides (model.x=y), and "
                 "cpsim's --platform P --nodes N --model NAME|hf:config.json --name NAME");
  mg->callback([mg_args, &rc] {
    rc = report_errors("import megatron", "", [&] {
      support::check_outputs({{"-o", mg_args->output}}, megatron_inputs(mg_args->args));
      std::string dir;
      if (const size_t slash = mg_args->output.rfind('/'); slash != std::string::npos)
        dir = mg_args->output.substr(0, slash);
      const scenario::MegatronImport imp = scenario::import_megatron(mg_args->args, dir);
      list("note: arguments not understood", imp.not_understood);
      for (const auto& n : imp.notes) std::cerr << "note: " << n << "\n";
      emit(imp.yaml, mg_args->output);
      return 0;
    });
  });
}

}  // namespace cpsim::app
