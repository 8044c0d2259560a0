#include "app/compare_timeline.hpp"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace cpsim::app {

namespace {

nlohmann::json timeline_meta(const char* what, int pid, int tid, const nlohmann::json& args) {
  nlohmann::json m = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", args}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

/// cpsim's trace: the pid of each rank's "GPU r" process, and each (pid, tid)'s thread name.
struct SimulatedLanes {
  std::map<int, int> pid_of_rank;
  std::map<std::pair<int, int>, std::string> thread_name;
};

SimulatedLanes simulated_lanes(const nlohmann::json& events) {
  SimulatedLanes l;
  for (const auto& e : events) {
    if (e.value("ph", "") != "M") continue;
    const std::string what = e.value("name", "");
    const std::string name = e.contains("args") ? e["args"].value("name", "") : "";
    if (what == "process_name" && name.rfind("GPU ", 0) == 0)
      l.pid_of_rank[std::stoi(name.substr(4))] = e.value("pid", -1);
    else if (what == "thread_name")
      l.thread_name[{e.value("pid", -1), e.value("tid", -1)}] = name;
  }
  return l;
}

nlohmann::json step_event(int pid, double dur_us, const char* name) {
  return {{"ph", "X"}, {"pid", pid}, {"tid", 0}, {"name", name}, {"cat", "step"}, {"ts", 0.0}, {"dur", dur_us}};
}

}  // namespace

nlohmann::json compare_timeline(const std::vector<MeasuredRank>& measured, const nlohmann::json& simulated,
                                double step_us, const std::string& scenario) {
  const nlohmann::json& sim_events = simulated.is_object() ? simulated.at("traceEvents") : simulated;
  const SimulatedLanes lanes = simulated_lanes(sim_events);
  nlohmann::json events = nlohmann::json::array();
  std::map<int, int> out_pid_of_sim_pid;
  nlohmann::json unsimulated = nlohmann::json::array();
  int pid = 0;
  for (const auto& m : measured) {
    // Measured first, its simulation right below: the pair reads as one comparison.
    const int mpid = ++pid;
    const std::string base = m.file.substr(m.file.find_last_of('/') + 1);
    events.push_back(timeline_meta("process_name", mpid, -1,
                                   {{"name", "rank " + std::to_string(m.rank) + " measured (" + base + ")"}}));
    events.push_back(timeline_meta("process_sort_index", mpid, -1, {{"sort_index", mpid}}));
    events.push_back(timeline_meta("thread_name", mpid, 0, {{"name", "step"}}));
    events.push_back(step_event(mpid, m.window_us, "ProfilerStep (the profiled window)"));
    std::set<int> streams;
    for (const auto& k : m.kernels) {
      streams.insert(k.stream);
      events.push_back({{"ph", "X"}, {"pid", mpid}, {"tid", k.stream}, {"name", k.name}, {"cat", k.kernel_class},
                        {"ts", k.start_us}, {"dur", k.dur_us}, {"args", {{"side", "measured"}, {"rank", m.rank}}}});
    }
    for (int s : streams)
      events.push_back(timeline_meta("thread_name", mpid, s, {{"name", "stream " + std::to_string(s)}}));
    const auto sim = lanes.pid_of_rank.find(m.rank);
    if (sim == lanes.pid_of_rank.end()) {
      unsimulated.push_back(m.rank);
      continue;
    }
    const int spid = ++pid;
    out_pid_of_sim_pid[sim->second] = spid;
    events.push_back(timeline_meta("process_name", spid, -1, {{"name", "rank " + std::to_string(m.rank) + " simulated"}}));
    events.push_back(timeline_meta("process_sort_index", spid, -1, {{"sort_index", spid}}));
    events.push_back(timeline_meta("thread_name", spid, 0, {{"name", "step"}}));
    events.push_back(step_event(spid, step_us, "simulated step"));
    for (const auto& [key, name] : lanes.thread_name)
      if (key.first == sim->second) events.push_back(timeline_meta("thread_name", spid, key.second, {{"name", name}}));
  }
  for (const auto& e : sim_events) {
    if (e.value("ph", "") != "X") continue;
    const auto to = out_pid_of_sim_pid.find(e.value("pid", -1));
    if (to == out_pid_of_sim_pid.end()) continue;
    nlohmann::json x = e;
    x["pid"] = to->second;
    x["args"]["side"] = "simulated";
    events.push_back(std::move(x));
  }
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& m : measured)
    windows.push_back({{"rank", m.rank}, {"file", m.file}, {"window", m.window}, {"window_us", m.window_us}});
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"cpsim", "compare timeline"},
            {"scenario", scenario},
            {"time_axis", "measured: the profiled window's start at 0; simulated: the step's start at 0"},
            {"measured", std::move(windows)},
            {"ranks_not_simulated", std::move(unsimulated)}}}};
}

}  // namespace cpsim::app
