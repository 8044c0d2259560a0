// flash2 benchmark: times every shape of a shape list (forward and backward) with CUDA events
// and writes a kernel profile CSV (kernels/profiles format) for the simulator's cost model.
// Per shape and direction: `warmup` untimed runs, then `repeats` runs timed one by one; the
// median is reported. Clocks are left as the driver sets them (not pinned): the figures are
// what training sees, boost and throttling included. Not a test: never gates anything.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention/common/attention.hpp"
#include "attention/flash2/cuda.hpp"
#include "attention/reference/reference.hpp"

using namespace cpsim::kernels;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
}

struct Options {
  std::string shapes = std::string(CPSIM_KERNELS_DIR) + "/attention/shapes.csv";
  std::string out;
  std::string commit;
  std::string gpu;
  int warmup = 3;
  int repeats = 10;
  double max_seconds = 0;  ///< stop starting new shapes after this long (0: no limit)
  bool fwd = true, bwd = true;
};

void usage() {
  std::puts(
      "usage: flash2_bench [--shapes FILE] [--out FILE.csv] [--warmup N] [--repeats N]\n"
      "                    [--commit SHA] [--gpu NAME] [--max-seconds S] [--only fwd|bwd]\n"
      "Times each shape of FILE (default kernels/attention/shapes.csv) and writes a profile\n"
      "CSV (default: stdout). --gpu overrides the device name in the `gpu` column; --commit\n"
      "(default $CPSIM_COMMIT) fills the `commit` column.");
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* c = std::getenv("CPSIM_COMMIT")) o.commit = c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--shapes") {
      o.shapes = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--commit") {
      o.commit = value();
    } else if (a == "--gpu") {
      o.gpu = value();
    } else if (a == "--warmup") {
      o.warmup = std::stoi(value());
    } else if (a == "--repeats") {
      o.repeats = std::stoi(value());
    } else if (a == "--max-seconds") {
      o.max_seconds = std::stod(value());
    } else if (a == "--only") {
      const std::string v = value();
      o.fwd = v == "fwd";
      o.bwd = v == "bwd";
      if (!o.fwd && !o.bwd) throw std::runtime_error("--only takes fwd or bwd");
    } else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      throw std::runtime_error("unknown option " + a);
    }
  }
  if (o.repeats < 1 || o.warmup < 0) throw std::runtime_error("need --repeats >= 1, --warmup >= 0");
  if (o.commit.empty()) o.commit = "unknown";
  return o;
}

/// Device memory, freed on scope exit.
struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc"); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() { cudaFree(p); }
};

/// Fills `bytes` of device memory with random BF16 normal(0, 1) values (a 1 Mi pattern tiled).
void fill_bf16(void* dst, size_t elems) {
  static std::vector<uint16_t> pattern = [] {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> dist(0.f, 1.f);
    std::vector<uint16_t> v(1 << 20);
    for (auto& e : v) e = reference::to_bf16_bits(dist(rng));
    return v;
  }();
  auto* d = static_cast<uint16_t*>(dst);
  for (size_t at = 0; at < elems; at += pattern.size()) {
    const size_t n = std::min(pattern.size(), elems - at);
    check(cudaMemcpy(d + at, pattern.data(), n * 2, cudaMemcpyHostToDevice), "fill");
  }
}

template <class Launch>
double median_us(Launch&& launch, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) check(launch(), "warm-up launch");
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(start), "record");
    check(launch(), "launch");
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    t.push_back(ms * 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(t.begin(), t.end());
  return t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    const std::vector<BenchShape> shapes = load_shape_list(opt.shapes);
    int dev = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    const std::string gpu = opt.gpu.empty() ? prop.name : opt.gpu;
    std::FILE* out = stdout;
    if (!opt.out.empty()) {
      out = std::fopen(opt.out.c_str(), "w");
      if (!out) throw std::runtime_error("cannot write " + opt.out);
    }
    std::fprintf(out, "%s\n", profile_csv_header());
    std::fprintf(stderr, "flash2_bench on %s (%d SMs), %zu shapes, median of %d after %d warm-up\n",
                 prop.name, prop.multiProcessorCount, shapes.size(), opt.repeats, opt.warmup);
    const auto t0 = std::chrono::steady_clock::now();
    for (const BenchShape& bs : shapes) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (opt.max_seconds > 0 && elapsed > opt.max_seconds) {
        std::fprintf(stderr, "time budget of %.0f s spent: skipping the remaining shapes\n",
                     opt.max_seconds);
        break;
      }
      if (!flash2::supported_head_dim(bs.head_dim)) {
        std::fprintf(stderr, "skip %dx%d d%d: head dim unsupported\n", bs.q_len, bs.kv_len,
                     bs.head_dim);
        continue;
      }
      HostMask hm;
      make_mask(bs, 1, hm);
      const AttnShape& s = hm.shape;
      const int64_t pairs = count_pairs(s, hm.spec);
      const size_t q_elems = static_cast<size_t>(s.q_len) * s.heads_q * s.head_dim;
      const size_t kv_elems = static_cast<size_t>(s.kv_len) * s.heads_kv * s.head_dim;
      Device q(q_elems * 2), k(kv_elems * 2), v(kv_elems * 2), o(q_elems * 2), dout(q_elems * 2);
      Device dq(q_elems * 2), dk(kv_elems * 2), dv(kv_elems * 2);
      Device lse(static_cast<size_t>(s.heads_q) * s.q_len * 4);
      Device ws(flash2::backward_workspace_bytes(s));
      Device qdoc(hm.q_doc.size() * 4), kdoc(hm.k_doc.size() * 4);
      fill_bf16(q.p, q_elems);
      fill_bf16(k.p, kv_elems);
      fill_bf16(v.p, kv_elems);
      fill_bf16(dout.p, q_elems);
      MaskSpec mask = hm.spec;
      if (!hm.q_doc.empty()) {
        check(cudaMemcpy(qdoc.p, hm.q_doc.data(), hm.q_doc.size() * 4, cudaMemcpyHostToDevice),
              "docs");
        check(cudaMemcpy(kdoc.p, hm.k_doc.data(), hm.k_doc.size() * 4, cudaMemcpyHostToDevice),
              "docs");
        mask.q_doc = static_cast<const int32_t*>(qdoc.p);
        mask.k_doc = static_cast<const int32_t*>(kdoc.p);
      }
      flash2::ForwardArgs fa;
      fa.shape = s;
      fa.mask = mask;
      fa.q = flash2::contiguous(q.p, s.q_len, s.heads_q, s.head_dim);
      fa.k = flash2::contiguous(k.p, s.kv_len, s.heads_kv, s.head_dim);
      fa.v = flash2::contiguous(v.p, s.kv_len, s.heads_kv, s.head_dim);
      fa.o = flash2::contiguous(o.p, s.q_len, s.heads_q, s.head_dim);
      fa.lse = static_cast<float*>(lse.p);
      flash2::BackwardArgs ba;
      ba.shape = s;
      ba.mask = mask;
      ba.q = fa.q;
      ba.k = fa.k;
      ba.v = fa.v;
      ba.o = fa.o;
      ba.dout = flash2::contiguous(dout.p, s.q_len, s.heads_q, s.head_dim);
      ba.dq = flash2::contiguous(dq.p, s.q_len, s.heads_q, s.head_dim);
      ba.dk = flash2::contiguous(dk.p, s.kv_len, s.heads_kv, s.head_dim);
      ba.dv = flash2::contiguous(dv.p, s.kv_len, s.heads_kv, s.head_dim);
      ba.lse = fa.lse;
      ba.workspace = ws.p;
      check(flash2::forward(fa), "forward");  // o and lse for the backward
      for (int dir = 0; dir < 2; ++dir) {
        const bool backward = dir == 1;
        if ((backward && !opt.bwd) || (!backward && !opt.fwd)) continue;
        const double us =
            backward ? median_us([&] { return flash2::backward(ba); }, opt.warmup, opt.repeats)
                     : median_us([&] { return flash2::forward(fa); }, opt.warmup, opt.repeats);
        ProfileRow r;
        r.gpu = gpu;
        r.kernel = "cpsim-flash2";
        r.direction = backward ? "bwd" : "fwd";
        r.q_len = s.q_len;
        r.kv_len = s.kv_len;
        r.mask = mask_name(bs.mask);
        r.unmasked_fraction =
            static_cast<double>(pairs) / (static_cast<double>(s.q_len) * s.kv_len);
        r.heads_q = s.heads_q;
        r.heads_kv = s.heads_kv;
        r.head_dim = s.head_dim;
        r.time_us = us;
        r.tflops = attention_flops(s, pairs, backward) / (us * 1e-6) / 1e12;
        r.source = "measured";
        r.commit = opt.commit;
        std::fprintf(out, "%s\n", format_profile_row(r).c_str());
        std::fflush(out);
        std::fprintf(stderr, "  %s %6d x %-6d %-13s h%d/%d d%d  %10.1f us  %6.1f TFLOP/s\n",
                     r.direction.c_str(), s.q_len, s.kv_len, r.mask.c_str(), s.heads_q, s.heads_kv,
                     s.head_dim, us, r.tflops);
      }
    }
    if (out != stdout) std::fclose(out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flash2_bench: error: %s\n", e.what());
    return 1;
  }
}
