// Unit parsing: every quantity in a scenario goes through these.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "scenario/load.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {
std::string reason(double (*parse)(const std::string&), const std::string& s) {
  try {
    parse(s);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST(Units, Bytes) {
  EXPECT_DOUBLE_EQ(parse_bytes("4096"), 4096);
  EXPECT_DOUBLE_EQ(parse_bytes("80GiB"), 80.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bytes("1.5GB"), 1.5e9);
  EXPECT_DOUBLE_EQ(parse_bytes("25MB"), 25e6);
  EXPECT_DOUBLE_EQ(parse_bytes("4KB"), 4000);
  EXPECT_DOUBLE_EQ(parse_bytes("4kB"), 4000);
  EXPECT_DOUBLE_EQ(parse_bytes("4KiB"), 4096);
  EXPECT_DOUBLE_EQ(parse_bytes("2MiB"), 2.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(parse_bytes("1TB"), 1e12);
  EXPECT_DOUBLE_EQ(parse_bytes("1 TiB"), 1099511627776.0);
  EXPECT_DOUBLE_EQ(parse_bytes("12B"), 12);
  EXPECT_DOUBLE_EQ(parse_bytes("1e9"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bytes("0"), 0);  // zero parses; callers decide whether it means anything
}

TEST(Units, BytesRejects) {
  EXPECT_EQ(reason(parse_bytes, "-1GB"), "negative value '-1GB' is not allowed");
  EXPECT_EQ(reason(parse_bytes, "80Gb"),
            "unknown unit 'Gb' in '80Gb'; allowed: B, KB, kB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB");
  EXPECT_EQ(reason(parse_bytes, "abc"), "expected a size such as 80GiB, 1.5GB or 4096, got 'abc'");
  EXPECT_EQ(reason(parse_bytes, ""), "expected a size such as 80GiB, 1.5GB or 4096, got nothing");
  EXPECT_EQ(reason(parse_bytes, "nan"), "expected a size such as 80GiB, 1.5GB or 4096, got 'nan'");
  EXPECT_EQ(reason(parse_bytes, "inf"), "expected a size such as 80GiB, 1.5GB or 4096, got 'inf'");
  EXPECT_EQ(reason(parse_bytes, "1e999GB"), "'1e999GB' is out of range");
  EXPECT_EQ(reason(parse_bytes, "1.2.3"), "expected a size such as 80GiB, 1.5GB or 4096, got '1.2.3'");
}

TEST(Units, Bandwidth) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GBps"), 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("46 GB/s"), 46e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gbps"), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gb/s"), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2.95TBps"), 2.95e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("25MBps"), 25e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GiB/s"), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e9"), 1e9);  // a bare number is bytes per second
}

TEST(Units, BandwidthRejects) {
  EXPECT_EQ(reason(parse_bandwidth, "-5GBps"), "negative value '-5GBps' is not allowed");
  EXPECT_EQ(reason(parse_bandwidth, "450GB"),
            "unknown unit 'GB' in '450GB'; allowed: a prefix (k, K, M, G, T, P, Ki, Mi, Gi, Ti) with Bps or "
            "B/s for bytes, bps or b/s for bits");
  EXPECT_EQ(reason(parse_bandwidth, "fast"),
            "expected a bandwidth such as 450GBps, 46GB/s or 400Gbps, got 'fast'");
}

TEST(Units, Time) {
  EXPECT_DOUBLE_EQ(parse_time("1.5us"), 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_time("150ns"), 150e-9);
  EXPECT_DOUBLE_EQ(parse_time("3ms"), 3e-3);
  EXPECT_DOUBLE_EQ(parse_time("2s"), 2);
  EXPECT_DOUBLE_EQ(parse_time("2"), 2);
  EXPECT_DOUBLE_EQ(parse_time("1\u00b5s"), 1e-6);
  EXPECT_DOUBLE_EQ(parse_time("0"), 0);
}

TEST(Units, TimeRejects) {
  EXPECT_EQ(reason(parse_time, "-1us"), "negative value '-1us' is not allowed");
  EXPECT_EQ(reason(parse_time, "3 hours"),
            "unknown unit 'hours' in '3 hours'; allowed: s, ms, us, \u00b5s, \u03bcs, ns, ps, min");
  EXPECT_EQ(reason(parse_time, "soon"), "expected a time such as 1.5us, 150ns or 3ms, got 'soon'");
}

TEST(Units, Tokens) {
  EXPECT_DOUBLE_EQ(parse_tokens("128K"), 131072);
  EXPECT_DOUBLE_EQ(parse_tokens("1M"), 1048576);
  EXPECT_DOUBLE_EQ(parse_tokens("32768"), 32768);
  EXPECT_DOUBLE_EQ(parse_tokens("4k"), 4096);
  EXPECT_DOUBLE_EQ(parse_tokens("1.5K"), 1536);
  EXPECT_DOUBLE_EQ(parse_tokens("256Ki"), 262144);
}

TEST(Units, TokensRejects) {
  EXPECT_EQ(reason(parse_tokens, "0.3K"), "'0.3K' is not a whole number of tokens");
  EXPECT_EQ(reason(parse_tokens, "-4K"), "negative value '-4K' is not allowed");
  EXPECT_EQ(reason(parse_tokens, "128KB"), "unknown unit 'KB' in '128KB'; allowed: k, K, Ki, M, Mi, G, Gi");
  EXPECT_EQ(reason(parse_tokens, "lots"), "expected a token count such as 128K, 1M or 32768, got 'lots'");
}

TEST(Units, Flops) {
  EXPECT_DOUBLE_EQ(parse_flops("989TFLOPS"), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops("989e12"), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops("989 TFLOP/s"), 989e12);
  EXPECT_DOUBLE_EQ(parse_flops("2.25PFLOPS"), 2.25e15);
  EXPECT_DOUBLE_EQ(parse_flops("100 Gflops"), 100e9);
}

TEST(Units, FlopsRejects) {
  EXPECT_EQ(reason(parse_flops, "-1TFLOPS"), "negative value '-1TFLOPS' is not allowed");
  EXPECT_EQ(reason(parse_flops, "NaN"), "expected a FLOP rate such as 989TFLOPS or 989e12, got 'NaN'");
  EXPECT_THROW(parse_flops("989TB"), std::invalid_argument);
}

}  // namespace CPSIM_TEST_TU
