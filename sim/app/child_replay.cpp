// A Trace through a pipe: the child (app/process_pool) replays and writes it as flat bytes.
#include "app/child_replay.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/process_pool.hpp"

namespace cpsim::app {

namespace {

struct Writer {
  std::string buf;
  void raw(const void* p, size_t n) {
    if (n > 0) buf.append(static_cast<const char*>(p), n);  // an empty vector's data() may be null
  }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void vec(const schedule::TimeArray& v) {
    u64(v.size());
    raw(v.data(), v.size() * sizeof(double));
  }
};

struct Reader {
  const std::string& buf;
  size_t at = 0;
  void raw(void* p, size_t n) {
    if (at + n > buf.size()) throw std::runtime_error("replay child: truncated result");
    if (n > 0) std::memcpy(p, buf.data() + at, n);  // an empty vector's data() may be null
    at += n;
  }
  uint64_t u64() {
    uint64_t v;
    raw(&v, sizeof v);
    return v;
  }
  double f64() {
    double v;
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    std::string s(u64(), '\0');
    raw(s.data(), s.size());
    return s;
  }
  schedule::TimeArray vec() {
    schedule::TimeArray v(u64());
    raw(v.data(), v.size() * sizeof(double));
    return v;
  }
};

}  // namespace

std::string encode_trace(const schedule::Trace& t) {
  Writer w;
  w.vec(t.start_s);
  w.vec(t.end_s);
  w.f64(t.makespan_s);
  w.str(t.engine);
  w.f64(t.wall_s);
  return w.buf;
}

schedule::Trace decode_trace(const std::string& bytes) {
  Reader r{bytes};
  schedule::Trace t;
  t.start_s = r.vec();
  t.end_s = r.vec();
  t.makespan_s = r.f64();
  t.engine = r.str();
  t.wall_s = r.f64();
  return t;
}

schedule::Trace replay_in_child(const schedule::TaskGraph& g, const model::Topology& topo,
                                scenario::EngineKind kind, const engine::ReplayOptions& opt) {
  return decode_trace(pool::run_in_child([&] { return encode_trace(engine::replay(g, topo, kind, opt)); }));
}

}  // namespace cpsim::app
