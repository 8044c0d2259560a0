#include "report/output.hpp"

#include "support/safe_write.hpp"
#include "scenario/enum_names.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cpsim::report {

using nlohmann::json;
using schedule::OpKind;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// A perturbation what-if's try: its step without, what the perturbation costs (step with
/// minus step without) and that cost's share of the step, or why it has none.
json perturb_try_json(const PerturbWhatIf::Try& t, double step_with_s) {
  json j = {{"kind", t.kind}, {"label", t.label}};
  if (t.step_without_s < 0) {
    j["error"] = t.error;
    return j;
  }
  j["step_without_s"] = t.step_without_s;
  j["cost_s"] = step_with_s - t.step_without_s;
  j["cost_fraction"] = step_with_s > 0 ? (step_with_s - t.step_without_s) / step_with_s : 0.0;
  return j;
}

/// "rail 0 down on every node: costs 0.4213 s (12.1 %)".
std::string perturb_try_line(const PerturbWhatIf::Try& t, double step_with_s) {
  if (t.step_without_s < 0) return t.label + ": not priced (" + t.error + ")";
  const double cost = step_with_s - t.step_without_s;
  // Under 0.05 % either way prints as 0.0 %, not "-0.0 %" (jitter removed may lengthen a step).
  const double pct = step_with_s > 0 ? 100 * cost / step_with_s : 0.0;
  return t.label + fmt(": costs %.4f s", cost) + fmt(" (%.1f %%)", std::fabs(pct) < 0.05 ? 0.0 : pct);
}

/// "rank 5 waited 0.8000 s for fwd ring-zigzag kv_p2p [r3->r5], longest 0.0200 s at layer
/// 12, micro-batch 0, step 4; 7 other ranks too, up to 0.7900 s".
std::string top_wait_line(const TopWait& t) {
  const auto& rel = t.releaser;
  std::string s = "rank " + std::to_string(t.rank) + fmt(" waited %.4f s for ", rel.wait_s) + rel.op +
                  fmt(", longest %.4f s", rel.longest_s);
  std::string at;
  for (const auto& [name, v] : {std::pair{"layer ", rel.layer}, {"micro-batch ", rel.micro}, {"step ", rel.step}})
    if (v >= 0) at += (at.empty() ? " at " : ", ") + std::string(name) + std::to_string(v);
  s += at;
  if (t.other_ranks > 0)
    s += "; " + std::to_string(t.other_ranks) +
         (t.other_ranks == 1 ? fmt(" other rank too, %.4f s", t.others_max_s)
                             : fmt(" other ranks too, up to %.4f s", t.others_max_s));
  return s;
}

json top_wait_json(const TopWait& t) {
  const auto& rel = t.releaser;
  auto opt = [](int v) { return v >= 0 ? json(v) : json(); };
  return {{"rank", t.rank}, {"op", rel.op}, {"releaser_rank", rel.rank}, {"wait_s", rel.wait_s},
          {"longest_s", rel.longest_s}, {"layer", opt(rel.layer)}, {"micro_batch", opt(rel.micro)},
          {"step", opt(rel.step)}, {"other_ranks", t.other_ranks}, {"others_min_s", t.others_min_s},
          {"others_max_s", t.others_max_s}};
}

/// Kinds of op in the JSON's top_waits, and the summary's first few of them.
constexpr size_t kTopWaitsJson = 5, kTopWaitsSummary = 3;

}  // namespace

std::string pricing_shares(const std::map<std::string, std::map<std::string, double>>& time_s) {
  std::string out;
  for (const auto& [kind, by_source] : time_s) {
    double total = 0;
    for (const auto& [s, t] : by_source) total += t;
    std::vector<std::pair<double, std::string>> shares;
    for (const auto& [s, t] : by_source) shares.emplace_back(total > 0 ? t / total : 0.0, s);
    // Largest share first; ties by name so the text is the same on every run.
    std::sort(shares.begin(), shares.end(),
              [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    out += (out.empty() ? "" : "; ") + kind + ":";
    for (size_t i = 0; i < shares.size(); ++i) {
      const double pct = 100 * shares[i].first;
      out += (i ? ", " : " ") + shares[i].second +
             (pct > 0 && pct < 0.5 ? std::string(" <1 %") : fmt(" %.0f %%", pct));
    }
  }
  return out;
}

json result_json(const Result& r, const scenario::Scenario& sc) {
  json j;
  j["name"] = r.name;
  j["engine"] = r.engine;
  j["scope"] = r.scope;
  j["step_time_s"] = r.step_time_s;
  j["mode"] = scenario::name_of(sc.mode, scenario::kModeNames);
  // Prefill: the whole forward is the time to the first generated token.
  if (sc.mode == scenario::Mode::Prefill) {
    // Only a whole model's forward is a time to first token; a layer's is its forward time.
    j[r.scope == "step" ? "ttft_s" : "forward_time_s"] = r.step_time_s;
    const model::KvCache kv = model::kv_cache_per_rank(sc);
    j["kv_cache_bytes_per_rank"] = {{"full_attention", kv.full_bytes}, {"sliding_window", kv.sliding_bytes},
                                    {"linear_attention", kv.linear_bytes}, {"total", kv.total()}};
  }
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["model_flops"] = r.model_flops;
  j["gpus"] = r.gpus;
  j["breakdown"] = {{"compute_s", r.compute_s}, {"exposed_comm_s", r.exposed_comm_s},
                    {"idle_s", r.idle_s}, {"bubble_ratio", r.bubble_ratio}};
  j["time_by_category_s"] = r.time_by_category;
  j["time_by_op_s"] = r.time_by_op;
  j["compute_by_layer_kind_s"] = r.compute_by_layer_kind;
  json ranks = json::array();
  for (const auto& m : r.ranks) {
    json w = json::object();
    for (const auto& [k, v] : m.waited_on) w[std::to_string(k)] = v;
    ranks.push_back({{"rank", m.rank}, {"compute_s", m.compute_s}, {"comm_s", m.comm_s},
                     {"exposed_comm_s", m.exposed_comm_s}, {"idle_s", m.idle_s},
                     {"attention_compute_s", m.attention_compute_s},
                     {"bytes_sent", m.bytes_sent}, {"bytes_received", m.bytes_received},
                     {"wait_s", m.wait_s}, {"waited_on_s", w}});
    if (m.top_releaser.rank >= 0)
      ranks.back()["top_releaser"] = {{"op", m.top_releaser.op}, {"rank", m.top_releaser.rank},
                                      {"wait_s", m.top_releaser.wait_s}};
  }
  j["ranks"] = ranks;
  json waits = json::array();
  for (const TopWait& t : top_waits(r.ranks, kTopWaitsJson)) waits.push_back(top_wait_json(t));
  j["top_waits"] = waits;
  j["attention"] = {{"exposed_comm_s", r.attention.exposed_comm_s},
                    {"overlap_fraction", r.attention.overlap_fraction},
                    {"imbalance", r.attention.imbalance}, {"comm_s", r.attention.comm_s},
                    {"compute_s", r.attention.compute_s},
                    {"bytes_sent_per_rank", r.attention.bytes_sent_per_rank}};
  json terms = json::array();
  for (const auto& t : r.memory.terms)
    terms.push_back({{"name", t.name}, {"bytes", t.bytes}, {"allocated_bytes", t.allocated},
                     {"reserved_bytes", t.reserved}, {"source", t.source}});
  // The peak is the caching allocator's reserved peak plus the memory outside it (model/allocator.hpp).
  j["memory"] = {{"peak_bytes_per_rank", r.memory.peak_bytes},
                 {"allocated_bytes_per_rank", r.memory.allocated_bytes},
                 {"capacity_bytes", r.memory.capacity_bytes}, {"fits", r.memory.fits},
                 {"verdict", r.memory.verdict}, {"terms", terms}};
  json comm = json::object();
  for (const auto& [k, c] : r.communication)
    comm[k] = {{"total_s", c.total_s}, {"exposed_s", c.exposed_s}, {"bytes", c.bytes}};
  j["communication"] = comm;
  // The path's tail is what ends the step; keep it readable (CriticalPath::kLastOps).
  const json path = r.critical_path.last_described;
  j["critical_path"] = {{"length_s", r.critical_path.length_s},
                        {"by_category_s", r.critical_path.by_category},
                        {"ops", r.critical_path.ops.size()}, {"last_ops", path}};
  json crank = json::object();
  for (const auto& [k, v] : r.critical_path.compute_by_rank) crank[std::to_string(k)] = v;
  j["critical_path"]["compute_by_rank_s"] = crank;
  j["straggler_rank"] = r.straggler_rank;
  if (r.straggler) {
    const auto& st = *r.straggler;
    json tried = json::array();
    for (const auto& t : st.tried)
      tried.push_back({{"rank", t.rank}, {"factor", t.factor}, {"step_without_s", t.step_without_s}});
    j["straggler"] = {{"rank", st.rank >= 0 ? json(st.rank) : json()}, {"factor", st.factor},
                      {"step_with_s", st.step_with_s}, {"step_without_s", st.step_without_s},
                      {"shrink_s", st.shrink_s}, {"removed", st.removed}, {"tried", tried}};
  }
  if (r.perturbations) {
    const auto& pw = *r.perturbations;
    json tried = json::array();
    for (const auto& t : pw.tried) tried.push_back(perturb_try_json(t, pw.step_with_s));
    j["perturbations"] = {{"step_with_s", pw.step_with_s}, {"count", pw.perturbations},
                          {"priced", pw.tried.size()}, {"tried", tried},
                          {"all", pw.all ? perturb_try_json(*pw.all, pw.step_with_s) : json()}};
  }
  if (r.samples) {
    const auto& sm = *r.samples;
    j["samples"] = {{"count", sm.step_time_s.size()}, {"seeds", sm.seeds}, {"step_time_s", sm.step_time_s},
                    {"mean_s", sm.mean_s}, {"stdev_s", sm.stdev_s}, {"p50_s", sm.p50_s},
                    {"p95_s", sm.p95_s}, {"p99_s", sm.p99_s}, {"min_s", sm.min_s}, {"max_s", sm.max_s}};
  }
  json link_loads = json::array();
  for (const auto& l : r.links)
    link_loads.push_back({{"name", l.name}, {"class", l.cls}, {"bytes", l.bytes}, {"bw_Bps", l.bw_Bps},
                          {"busy_s", l.busy_s}, {"utilisation", l.utilisation}});
  j["links"] = link_loads;
  j["pricing"] = r.pricing;
  j["pricing_time_s"] = r.pricing_time_s;
  j["kernel_costs_from"] = pricing_shares(r.pricing_time_s);
  j["extrapolated_ops"] = r.extrapolated_ops;
  json links = json::object();
  for (const auto& [k, v] : r.bytes_per_link_class) links[k] = v;
  j["bytes_per_link_class"] = links;
  j["simulation"] = {{"ops", r.ops}, {"wall_s", r.sim_wall_s}, {"symmetry", r.symmetry},
                     {"replicas_copied", r.replicas_copied}};
  if (!r.why_not_copied.empty()) j["simulation"]["replicas_not_copied"] = r.why_not_copied;
  j["scenario"] = scenario_json(sc);
  return j;
}

std::string summary_table(const Result& r, const scenario::Scenario& sc) {
  std::ostringstream os;
  const auto& a = sc.parallel.attention;
  os << "cpsim: " << r.name << "  (" << sc.model.name << ", " << sc.training.seq_len
     << " tokens, " << sc.platform.name << ", tp" << sc.parallel.tp << " cp" << sc.parallel.cp
     << " pp" << sc.parallel.pp << " dp" << sc.parallel.dp << ", " << schedule::scheme_name(a)
     << ", " << r.scope << ", " << r.engine << ")\n";
  auto line = [&](const std::string& k, const std::string& v) {
    os << "  " << k << std::string(k.size() < 28 ? 28 - k.size() : 1, ' ') << v << "\n";
  };
  if (sc.mode == scenario::Mode::Prefill)
    line(r.scope == "step" ? "time to first token" : "forward time (prefill)", fmt("%.4f s", r.step_time_s) +
                                             fmt(", KV cache %.2f GB per GPU", model::kv_cache_per_rank(sc).total() / 1e9));
  else
    line(r.scope == "step" ? "step time" : "time", fmt("%.4f s", r.step_time_s));
  if (r.scope != "attention-layer") {
    line("throughput", fmt("%.0f tokens/s", r.tokens_per_s));
    line("model TFLOP/s per GPU", fmt("%.1f", r.tflops_per_gpu) + fmt("  (MFU %.1f %%)", 100 * r.mfu));
  } else {
    line("attention TFLOP/s per GPU", fmt("%.1f", r.tflops_per_gpu));
  }
  line("compute (mean per GPU)", fmt("%.4f s", r.compute_s));
  if (r.compute_by_layer_kind.size() > 1) {
    std::string kinds;
    for (const auto& [k, v] : r.compute_by_layer_kind) kinds += (kinds.empty() ? "" : ", ") + k + fmt(" %.3f s", v);
    line("  by layer type", kinds);
  }
  line("exposed communication", fmt("%.4f s", r.exposed_comm_s) + " (all kinds, while no compute runs)");
  {
    // Per kind, so a CP line that reads "92 % hidden" does not seem to contradict the total:
    // the exposed time may be TP or DP traffic. Kinds can be exposed at the same moment.
    std::string kinds;
    for (const auto& [k, c] : r.communication)
      if (c.total_s > 0)
        kinds += (kinds.empty() ? "" : ", ") + k + fmt(" %.4f", c.total_s) + fmt(" / %.4f s", c.exposed_s);
    if (!kinds.empty()) line("  by kind (total / exposed)", kinds);
  }
  line("idle / bubble", fmt("%.4f s", r.idle_s));
  line("attention comm (CP)", fmt("%.4f s", r.attention.comm_s) +
                                  fmt(", exposed %.4f s", r.attention.exposed_comm_s) +
                                  fmt(", overlap %.1f %%", 100 * r.attention.overlap_fraction));
  line("attention imbalance", fmt("%.3f (max/mean)", r.attention.imbalance));
  line("CP bytes sent per GPU", fmt("%.3f GB", r.attention.bytes_sent_per_rank / 1e9));
  line("memory per GPU", r.memory.verdict);
  if (r.straggler_rank >= 0)
    line("critical-path straggler", "rank " + std::to_string(r.straggler_rank));
  if (const auto waits = top_waits(r.ranks, kTopWaitsSummary); !waits.empty()) {
    line("top waits", "the kinds of op that ended the longest waits (a rank's total on one):");
    for (const TopWait& t : waits) os << "    " << top_wait_line(t) << "\n";
  }
  if (r.straggler) {
    const auto& st = *r.straggler;
    if (st.rank >= 0)
      line("straggler (what-if)", "rank " + std::to_string(st.rank) + fmt(" (x%.3f): ", st.factor) +
                                      fmt("step %.4f s without it", st.step_without_s) +
                                      fmt(", %.4f s shorter", st.shrink_s) +
                                      fmt(" (%.1f %%)", st.step_with_s > 0 ? 100 * st.shrink_s / st.step_with_s : 0.0));
    else
      line("straggler (what-if)", r.perturbations && !r.perturbations->tried.empty()
                                      ? "none: no rank is slowed (the faults' costs follow)"
                                      : "none: no rank has a static slowdown to remove");
  }
  if (r.perturbations && !r.perturbations->tried.empty()) {
    const auto& pw = *r.perturbations;
    line("faults (what-if)", "each removed in turn, the step simulated again:");
    for (const auto& t : pw.tried) os << "    " << perturb_try_line(t, pw.step_with_s) << "\n";
    if (pw.all) os << "    " << perturb_try_line(*pw.all, pw.step_with_s) << "\n";
    if (static_cast<int>(pw.tried.size()) < pw.perturbations)
      os << "    (" << pw.tried.size() << " of " << pw.perturbations
         << " priced, the most severe of each kind in turn; --what-if-perturbations " << pw.perturbations
         << " prices all)\n";
  }
  if (!r.links.empty()) {
    const auto& l = r.links.front();
    line("busiest link", l.name + " (" + l.cls + fmt("): %.1f %% busy", 100 * l.utilisation) +
                             fmt(", %.3f GB", l.bytes / 1e9) + fmt(" at %.1f GB/s", l.bw_Bps / 1e9));
  }
  if (r.samples && !r.samples->step_time_s.empty()) {
    const auto& sm = *r.samples;
    line("step time over " + std::to_string(sm.step_time_s.size()) + " seeds",
         fmt("mean %.4f s", sm.mean_s) + fmt(", p50 %.4f", sm.p50_s) + fmt(", p95 %.4f", sm.p95_s) +
             fmt(", p99 %.4f", sm.p99_s) + fmt(", min %.4f", sm.min_s) + fmt(", max %.4f", sm.max_s));
  }
  std::string src = pricing_shares(r.pricing_time_s);
  if (r.extrapolated_ops) src += fmt(" (%.0f ops extrapolated)", static_cast<double>(r.extrapolated_ops));
  line("kernel costs from", src);
  line("simulated", std::to_string(r.ops) + fmt(" ops in %.3f s wall", r.sim_wall_s));
  if (!r.symmetry.empty()) line("replica symmetry", r.symmetry);
  return os.str();
}

void write_chrome_trace(std::ostream& os, const schedule::TaskGraph& g, const schedule::Trace& tr,
                        const std::vector<schedule::OpId>& critical_path, const TraceFilter& f) {
  auto keep_rank = [&](int r) {
    return f.ranks.empty() || std::find(f.ranks.begin(), f.ranks.end(), r) != f.ranks.end();
  };
  auto keep_layer = [&](int l) {
    return l < 0 || f.layers.empty() || std::find(f.layers.begin(), f.layers.end(), l) != f.layers.end();
  };
  // Perfetto treats pid 0 and tid 0 as the kernel's swapper: GPU k is process k + 1 and
  // stream s is thread s + 1; the names and the "rank" argument carry the real numbers.
  auto pid_of = [](int rank) { return rank + 1; };
  auto tid_of = [](int stream) { return stream + 1; };
  std::vector<char> critical(g.size(), 0);
  for (schedule::OpId id : critical_path) critical[id] = 1;
  // Streamed: each event is serialised and written on its own, never the whole array (a JSON
  // document of millions of events took ~17x the trace's size in RAM: 8+ GB for the 1,024-GPU
  // scenario). The bytes are those json{{"traceEvents", [...]}, ...}.dump() gives: keys in
  // order, events joined by commas.
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto emit = [&](const json& e) {
    if (!first) os << ',';
    first = false;
    os << e.dump();
  };
  std::vector<char> named(static_cast<size_t>(g.num_ranks()), 0);
  std::map<std::pair<int, int>, bool> threads;
  auto meta = [&](int rank, int stream) {
    if (!named[rank]) {
      named[rank] = 1;
      emit({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_of(rank)}, {"args", {{"name", "GPU " + std::to_string(rank)}}}});
      emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid_of(rank)}, {"args", {{"sort_index", rank}}}});
    }
    if (!threads[{rank, stream}]) {
      threads[{rank, stream}] = true;
      emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid_of(rank)}, {"tid", tid_of(stream)},
                    {"args", {{"name", schedule::stream::name(static_cast<uint16_t>(stream))}}}});
      emit({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid_of(rank)}, {"tid", tid_of(stream)},
                    {"args", {{"sort_index", stream}}}});
    }
  };
  const char* phases[] = {"", "fwd", "bwd", "opt"};
  for (schedule::OpId id = 0; id < g.size(); ++id) {
    const auto& op = g.op(id);
    if (!keep_layer(op.label.layer)) continue;
    const double ts = tr.start_s[id] * 1e6, dur = (tr.end_s[id] - tr.start_s[id]) * 1e6;
    json args = {{"op", id}, {"layer", op.label.layer}, {"phase", phases[static_cast<int>(op.label.phase)]},
                 {"scheme", g.str(op.label.scheme)}, {"step", op.label.step}, {"micro_batch", op.label.micro}};
    if (op.label.shape >= 0) {
      const auto& s = g.shapes()[static_cast<size_t>(op.label.shape)];
      args["shape"] = {{"q_len", s.q_len}, {"kv_len", s.kv_len}, {"mask", scenario::mask_name(s.mask)},
                       {"unmasked_fraction", s.unmasked_fraction}, {"heads_q", s.heads_q},
                       {"heads_kv", s.heads_kv}, {"head_dim", s.head_dim}};
    }
    if (op.flops > 0) args["flops"] = op.flops;
    if (critical[id]) args["critical"] = true;
    const std::string name = g.str(op.label.name);
    const std::string cat = g.str(op.label.category).empty() ? "other" : g.str(op.label.category);
    if (op.kind == OpKind::Compute) {
      if (!keep_rank(op.rank)) continue;
      meta(op.rank, op.stream);
      args["rank"] = op.rank;
      emit({{"ph", "X"}, {"name", name}, {"cat", cat}, {"pid", pid_of(op.rank)}, {"tid", tid_of(op.stream)},
                    {"ts", ts}, {"dur", dur}, {"args", args}});
      continue;
    }
    args["bytes"] = op.bytes;
    args["src"] = op.rank;
    args["dst"] = op.peer;
    const bool ks = keep_rank(op.rank), kr = keep_rank(op.peer);
    if (ks) {
      meta(op.rank, op.stream);
      args["rank"] = op.rank;
      emit({{"ph", "X"}, {"name", name + " send"}, {"cat", cat}, {"pid", pid_of(op.rank)},
                    {"tid", tid_of(op.stream)}, {"ts", ts}, {"dur", dur}, {"args", args}});
    }
    if (kr) {
      meta(op.peer, op.peer_stream);
      args["rank"] = op.peer;
      emit({{"ph", "X"}, {"name", name + " recv"}, {"cat", cat}, {"pid", pid_of(op.peer)},
                    {"tid", tid_of(op.peer_stream)}, {"ts", ts}, {"dur", dur}, {"args", args}});
    }
    if (ks && kr) {
      // Both ends bind to the slice enclosing their timestamp: the middle of each slice is
      // inside it (a slice's end is not: viewers close it there).
      const double mid = ts + dur / 2;
      emit({{"ph", "s"}, {"id", id}, {"name", name}, {"cat", "flow"}, {"pid", pid_of(op.rank)},
                    {"tid", tid_of(op.stream)}, {"ts", mid}});
      emit({{"ph", "f"}, {"bp", "e"}, {"id", id}, {"name", name}, {"cat", "flow"},
                    {"pid", pid_of(op.peer)}, {"tid", tid_of(op.peer_stream)}, {"ts", mid}});
    }
  }
  os << "]}";
}

void write_atomic(const std::string& path, const std::function<void(std::ostream&)>& write) {
  support::write_file_atomic(path, write);  // support/safe_write.hpp: checked target, private temporary, streamed
}

void write_atomic(const std::string& path, const std::string& text) { support::write_file_atomic(path, text); }

}  // namespace cpsim::report
