// `cpsim plan`'s axes beyond the layout: plan_axes.hpp.
#include "app/plan_axes.hpp"

#include <algorithm>

#include "app/plan_steps.hpp"
#include "model/memory.hpp"
#include "scenario/enum_names.hpp"
#include "scenario/load.hpp"

namespace cpsim::app::plan {

namespace {

std::string precision_label(const scenario::TrainingSpec& t) {
  return t.fp8 ? std::string("fp8-") + scenario::name_of(t.fp8_recipe, scenario::kFp8RecipeNames) : "bf16";
}

/// Whether the given scenario loads with `extra` (the platform refuses an FP8 recipe, ...).
bool loads(const std::string& path, std::vector<std::string> sets, const std::vector<std::string>& extra) {
  sets.insert(sets.end(), extra.begin(), extra.end());
  try {
    scenario::load_scenario(path, sets);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::string axis_suffix(const std::vector<std::string>& values) {
  std::string s;
  for (const auto& v : values) s += " " + v;
  return s;
}

std::vector<Axis> free_axes(const std::string& path, const std::vector<std::string>& sets,
                            const scenario::Scenario& given, std::vector<std::string>& not_searched) {
  std::vector<Axis> axes;
  // TP overlap needs TP inside a node of more than one GPU; the layouts at tp 1 keep "off".
  if (scenario::key_given(path, sets, "parallel.tp_comm_overlap")) {
    not_searched.push_back("tp_comm_overlap: the scenario sets parallel.tp_comm_overlap");
  } else if (given.platform.gpus_per_node < 2) {
    not_searched.push_back("tp_comm_overlap: one GPU per node, no TP to overlap");
  } else {
    axes.push_back({"tp_comm_overlap",
                    {{"off", {"parallel.tp_comm_overlap=false"}},
                     {"on", {"parallel.sequence_parallel=true", "parallel.tp_comm_overlap=true"}}}});
  }
  if (scenario::key_given(path, sets, "training.precision")) {
    not_searched.push_back("precision: the scenario sets training.precision");
  } else {
    Axis a{"precision", {{precision_label(given.training), {"training.precision=bf16"}}}};
    for (const auto& r : scenario::kFp8RecipeNames) {
      const std::vector<std::string> v = {"training.precision=fp8", "training.fp8_recipe=" + std::string(r)};
      if (loads(path, sets, v)) a.values.push_back({"fp8-" + std::string(r), v});
    }
    if (a.values.size() > 1) axes.push_back(a);
    else not_searched.push_back("precision: GPU '" + given.platform.gpu.name + "' runs no FP8 recipe");
  }
  if (scenario::key_given(path, sets, "training.stack")) {
    not_searched.push_back("stack: the scenario sets training.stack");
  } else {
    Axis a{"stack", {}};
    const std::string own = scenario::name_of(given.training.stack, scenario::kStackNames);
    a.values.push_back({own, {"training.stack=" + own}});
    for (const auto& s : scenario::kStackNames)
      if (s != own && loads(path, sets, {"training.stack=" + std::string(s)}))
        a.values.push_back({std::string(s), {"training.stack=" + std::string(s)}});
    if (a.values.size() > 1) axes.push_back(a);
  }
  return axes;
}

void search_axes(const std::string& path, const std::vector<std::string>& sets, const Options& opt,
                 const std::vector<Axis>& axes, size_t keep, Result& res, std::vector<size_t>& ok) {
  if (axes.empty() || ok.empty()) return;
  const double capacity = scenario::load_scenario(path, sets).platform.gpu.memory_bytes;
  const double budget = memory_budget(opt, capacity);
  // choice[a] = index into axes[a].values; 0 is the scenario's own value (every base candidate).
  auto make = [&](const Candidate& base, const std::vector<size_t>& choice, Candidate& c,
                  scenario::Scenario& sc) {
    c = base;
    c.variant_of = static_cast<size_t>(&base - res.all.data());
    c.status.clear();
    c.why.clear();
    c.analytic_s = c.simgrid_s = -1;
    c.estimate_s = 0;  // the layout's bound prices its own precision and stack, not this variant's
    c.analytic_wall_s = c.simgrid_wall_s = c.analytic_start_s = c.simgrid_start_s = -1;
    const std::string old_suffix = axis_suffix(base.axis_values);
    c.label = base.label.substr(0, base.label.size() - old_suffix.size());
    for (size_t a = 0; a < axes.size(); ++a) {
      const AxisValue& v = axes[a].values[choice[a]];
      c.axis_values[a] = v.label;
      if (choice[a] != 0) c.sets.insert(c.sets.end(), v.sets.begin(), v.sets.end());  // 0: the scenario's own
    }
    const std::string layout = c.label.substr(0, c.label.rfind(" z"));  // less " z<stage>"
    // A value that needs more memory (FP8's weight copies beside the bf16 ones) may take a
    // higher ZeRO stage, as the layouts themselves do (the lowest that fits: stage 2 of
    // plan_search.hpp).
    for (int z = base.zero_stage; z <= 3; ++z) {
      c.zero_stage = z;
      for (auto& st : c.sets)
        if (st.rfind("parallel.zero_stage=", 0) == 0) st = "parallel.zero_stage=" + std::to_string(z);
      c.label = layout + " z" + std::to_string(z) + axis_suffix(c.axis_values);
      auto all = sets;
      all.insert(all.end(), c.sets.begin(), c.sets.end());
      all.push_back("simulation.scope=step");
      all.push_back("simulation.engine=analytic");
      try {
        sc = scenario::load_scenario(path, all);
      } catch (const scenario::InputError& e) {
        c.status = "invalid";
        c.why = e.reason().empty() ? first_line(e.what()) : e.reason();
        return false;
      }
      c.peak_bytes = model::peak_rank_memory(sc).peak_bytes;
      if (c.peak_bytes <= budget) break;
    }
    if (c.peak_bytes > budget) {
      c.status = "oom";
      c.why = fmt("%.1f GB", c.peak_bytes / 1e9) + fmt(" > %.1f GB budget", budget / 1e9) +
              fmt(" (over by %.1f GB)", (c.peak_bytes - budget) / 1e9);
      return false;
    }
    return true;
  };
  // Runs the variants `choices` of `base`; returns the index in res.all of the fastest ranked one.
  auto run = [&](size_t base_i, const std::vector<std::vector<size_t>>& choices) {
    std::vector<scenario::Scenario> runs;
    std::vector<size_t> ids;
    for (const auto& ch : choices) {
      Candidate c;
      scenario::Scenario sc;
      const bool go = make(res.all[base_i], ch, c, sc);
      res.all.push_back(c);
      if (go) {
        runs.push_back(sc);
        ids.push_back(res.all.size() - 1);
      }
    }
    const std::vector<StepOutcome> st = bounded_steps(runs, opt);
    res.step_runs += static_cast<int>(runs.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      Candidate& c = res.all[ids[k]];
      c.analytic_wall_s = st[k].wall_s;
      if (!record(st[k], opt, c)) continue;
      c.analytic_s = st[k].step_s;
      c.status = "ranked";
      ok.push_back(ids[k]);
    }
  };
  std::vector<size_t> best(ok.begin(), ok.begin() + static_cast<std::ptrdiff_t>(std::min(keep, ok.size())));
  // The overlap helps only at TP > 1: the best such layout is tried too, so that a TP layout a
  // Megatron user would run with --tp-comm-overlap is not judged without it.
  const bool overlap = std::any_of(axes.begin(), axes.end(), [](const Axis& a) { return a.name == "tp_comm_overlap"; });
  if (overlap && std::none_of(best.begin(), best.end(), [&](size_t i) { return res.all[i].tp > 1; }))
    for (size_t i : ok)
      if (res.all[i].tp > 1) {
        best.push_back(i);
        break;
      }
  for (size_t b : best) {
    // One axis at a time from the scenario's values.
    std::vector<std::vector<size_t>> one;
    for (size_t a = 0; a < axes.size(); ++a)
      for (size_t v = 1; v < axes[a].values.size(); ++v) {
        std::vector<size_t> ch(axes.size(), 0);
        ch[a] = v;
        if (axes[a].name == "tp_comm_overlap" && res.all[b].tp < 2) continue;
        one.push_back(ch);
      }
    const size_t first = res.all.size();
    run(b, one);
    // The best value of each axis (by throughput, the scenario's own on ties), together.
    std::vector<size_t> combo(axes.size(), 0);
    int improved = 0;
    for (size_t a = 0; a < axes.size(); ++a) {
      double top = res.all[b].tokens_per_s();
      for (size_t k = 0; k < one.size(); ++k) {
        const Candidate& c = res.all[first + k];
        if (one[k][a] != 0 && c.status == "ranked" && c.tokens_per_s() > top) {
          top = c.tokens_per_s();
          combo[a] = one[k][a];
        }
      }
      improved += combo[a] != 0;
    }
    if (improved > 1) run(b, {combo});
  }
  std::stable_sort(ok.begin(), ok.end(), [&](size_t a, size_t b) {
    const double ta = res.all[a].tokens_per_s(), tb = res.all[b].tokens_per_s();
    return ta != tb ? ta > tb : res.all[a].label < res.all[b].label;
  });
}

}  // namespace cpsim::app::plan
