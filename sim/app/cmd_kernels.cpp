// `cpsim kernels shapes SCENARIO.yaml`: the distinct attention kernel shapes the scenario's
// schedule launches, in the profile CSV's key columns, so a user measures exactly those.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <tuple>

#include "app/commands.hpp"
#include "app/work_limit.hpp"
#include "model/cost_model.hpp"
#include "model/topology.hpp"
#include "scenario/load.hpp"
#include "schedule/step.hpp"

namespace cpsim::app {

void register_kernels(CLI::App& app, int& rc) {
  auto* kernels = app.add_subcommand("kernels", "kernel shapes and profiles");
  kernels->require_subcommand(1);
  register_kernels_price(kernels, rc);
  struct Args {
    std::string scenario;
    std::vector<std::string> sets;
  };
  auto args = std::make_shared<Args>();
  auto* shapes = kernels->add_subcommand("shapes", "list the attention kernel shapes a scenario needs (CSV)");
  shapes->add_option("scenario", args->scenario, "scenario YAML file")->required();
  shapes->add_option("--set", args->sets, "override a scenario key: key.path=value");
  shapes->callback([args, &rc] {
    scenario::Scenario sc;
    try {
      sc = scenario::load_scenario(args->scenario, args->sets);
    } catch (const scenario::InputError& e) {
      std::cerr << e.what() << "\n";
      rc = 2;
      return;
    }
    try {
      check_work(sc, {});
      const model::Topology topo(sc.platform);
      const auto cost = model::CostModel::make(sc.cost.profile, sc.platform.gpu);
      schedule::TaskGraph g;
      schedule::Pricer pricer(*cost);
      schedule::build_scenario(sc, topo, pricer, g);
      using Key = std::tuple<int, int64_t, int64_t, int, double, int, int, int>;
      std::map<Key, long> count;
      for (const auto& op : g.ops()) {
        if (op.label.shape < 0) continue;
        const auto& s = g.shapes()[static_cast<size_t>(op.label.shape)];
        const double frac = std::round(s.unmasked_fraction * 1e6) / 1e6;
        count[{op.label.phase == schedule::Phase::Backward ? 1 : 0, s.q_len, s.kv_len, static_cast<int>(s.mask),
               frac, s.heads_q, s.heads_kv, s.head_dim}]++;
      }
      std::cout << "direction,q_len,kv_len,mask,unmasked_fraction,heads_q,heads_kv,head_dim,dtype,launches\n";
      for (const auto& [k, n] : count) {
        const auto& [dir, q, kv, mask, frac, hq, hkv, d] = k;
        std::printf("%s,%lld,%lld,%s,%.6f,%d,%d,%d,bf16,%ld\n", dir ? "bwd" : "fwd",
                    static_cast<long long>(q), static_cast<long long>(kv),
                    scenario::mask_name(static_cast<scenario::Mask>(mask)), frac, hq, hkv, d, n);
      }
    } catch (const std::invalid_argument& e) {
      std::cerr << args->scenario << ": error: " << e.what() << "\n";
      rc = 2;
    }
  });
}

}  // namespace cpsim::app
