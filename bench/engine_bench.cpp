// Engine throughput: transfers simulated per second, wall time and peak RSS, for both engines on
// an h100-cluster-like platform built in code. Each (case, engine) runs in its own forked
// process, so SimGrid gets its one Engine and the RSS figure is that run's alone.
//
//   engine_bench            all cases
//   engine_bench ring64     one case (ring64, a2a512)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "engine/replay.hpp"
#include "schedule/collectives.hpp"

using namespace cpsim;
using schedule::OpId;
using schedule::TaskGraph;

namespace {

/// DGX H100 nodes on an NDR rail-optimised leaf/spine fabric (as platforms/h100-cluster.yaml).
scenario::PlatformSpec h100_cluster(int nodes) {
  scenario::PlatformSpec p;
  p.name = "h100-cluster-bench";
  p.nodes = nodes;
  p.gpus_per_node = 8;
  p.intra = scenario::IntraFabric::NVSwitch;
  p.nvlink = {450e9, 0.3e-6, 0.824};
  p.nvlink_domain_gpus = 8;
  p.nics_per_node = 8;
  p.nic = {50e9, 1.27e-6, 0.94};
  p.nodes_per_leaf = 32;
  p.spines = 8;
  p.oversubscription = 1;
  p.switch_latency_s = 150e-9;
  return p;
}

/// A ring of `gpus` GPUs forwarding 1 MiB blocks: the send of round r on GPU i waits for the
/// receive of round r-1 on GPU i (what a ring collective step does), `total` transfers.
TaskGraph ring(int gpus, int total) {
  TaskGraph g;
  schedule::OpLabel l;
  l.name = g.intern("ring");
  std::vector<OpId> prev(gpus, schedule::kNoOp), cur(gpus);
  for (int done = 0; done < total;) {
    for (int i = 0; i < gpus && done < total; ++i, ++done) {
      cur[i] = g.add_transfer(i, schedule::stream::kCpSend, (i + 1) % gpus,
                              schedule::stream::kCpRecv, 1 << 20, l);
      g.add_edge(prev[(i + gpus - 1) % gpus], cur[i]);
    }
    prev = cur;
  }
  g.finalize();
  return g;
}

TaskGraph alltoall(const model::Topology& topo, int gpus, double bytes) {
  TaskGraph g;
  schedule::CollectiveRequest req;
  req.op = schedule::CollOp::AllToAll;
  for (int i = 0; i < gpus; ++i) req.ranks.push_back(i);
  req.bytes = bytes;
  req.protocol = schedule::Protocol::Simple;
  schedule::add_collective(g, topo, req);
  g.finalize();
  return g;
}

struct Figures {
  double transfers = 0, sim_s = 0, build_s = 0, replay_s = 0, rss_MiB = 0;
  int ok = 0;
};

/// Runs fn in a child process and returns what it measured.
Figures in_child(const std::function<Figures()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Figures f = fn();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    f.rss_MiB = ru.ru_maxrss / 1024.0;  // Linux: KiB
    f.ok = 1;
    const ssize_t w = write(fds[1], &f, sizeof f);
    _exit(w == static_cast<ssize_t>(sizeof f) ? 0 : 1);
  }
  close(fds[1]);
  Figures f;
  if (read(fds[0], &f, sizeof f) != static_cast<ssize_t>(sizeof f)) f.ok = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return f;
}

void run_case(const char* name, int nodes,
              const std::function<TaskGraph(const model::Topology&)>& make) {
  for (auto kind : {scenario::EngineKind::Analytic, scenario::EngineKind::SimGrid}) {
    Figures f = in_child([&] {
      Figures r;
      const auto t0 = std::chrono::steady_clock::now();
      model::Topology topo(h100_cluster(nodes));
      TaskGraph g = make(topo);
      r.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (const auto& op : g.ops()) r.transfers += op.kind == schedule::OpKind::Transfer;
      engine::Trace tr = engine::replay(g, topo, kind);
      r.sim_s = tr.makespan_s;
      r.replay_s = tr.wall_s;
      return r;
    });
    const char* engine = kind == scenario::EngineKind::SimGrid ? "simgrid" : "analytic";
    if (!f.ok) {
      std::printf("%-22s %-9s failed\n", name, engine);
      continue;
    }
    std::printf("%-22s %-9s %10.0f %12.6f %9.3f %9.3f %14.0f %10.1f\n", name, engine, f.transfers,
                f.sim_s, f.build_s, f.replay_s, f.transfers / f.replay_s, f.rss_MiB);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  std::printf("%-22s %-9s %10s %12s %9s %9s %14s %10s\n", "case", "engine", "transfers",
              "simulated_s", "build_s", "replay_s", "transfers/s", "peakRSS_MiB");
  if (only.empty() || only == "ring64")
    run_case("ring64 (100k x 1MiB)", 8, [](const model::Topology&) { return ring(64, 100000); });
  if (only.empty() || only == "a2a512")
    run_case("alltoall512 (512MiB)", 64,
             [](const model::Topology& topo) { return alltoall(topo, 512, 512.0 * (1 << 20)); });
  return 0;
}
