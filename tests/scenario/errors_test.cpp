// The bad-input contract: every message exactly, with file:line:col, the YAML path, the source
// line and a caret.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scenario/load.hpp"
#include "support/scenario_error.hpp"

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

using namespace cpsim::scenario;

namespace {

const std::string kData = std::string(CPSIM_SOURCE_DIR) + "/tests/scenario/data/";


std::string file_err(const std::string& path, const std::vector<std::string>& overrides = {}) {
  try {
    load_scenario(path, overrides);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kHead = "platform: dgx-h100\nmodel: qwen3.8-27b\n";

}  // namespace

TEST(Errors, ValidBaseParses) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n"), "(no error)");
}

TEST(Errors, UnknownKeyDidYouMean) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n  attention: {shceme: ring}\n"),
            "s.yaml:6:15: error: parallel.attention.shceme: unknown key 'shceme' (did you mean 'scheme'?)\n"
            "    attention: {shceme: ring}\n"
            "                ^");
}

TEST(Errors, UnknownKeyListsAllowed) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nbananas: 3\n"),
            "s.yaml:4:1: error: bananas: unknown key 'bananas'; allowed: name, description, platform, model, "
            "training, parallel, simulation, cost, perturb, mode, memory\n"
            "  bananas: 3\n"
            "  ^");
}

TEST(Errors, UnknownKeyInsidePlatformMapping) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nodez: 4}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"),
            "s.yaml:1:34: error: platform.nodez: unknown key 'nodez' (did you mean 'nodes'?)\n"
            "  platform: {preset: h100-cluster, nodez: 4}\n"
            "                                   ^");
}

TEST(Errors, PxnIsABoolean) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nccl: {pxn: maybe}}\nmodel: qwen3.8-27b\n"
                                        "training: {seq_len: 128K}\n"),
            "s.yaml:1:46: error: platform.nccl.pxn: expected true or false, got 'maybe'\n"
            "  platform: {preset: h100-cluster, nccl: {pxn: maybe}}\n"
            "                                               ^");
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nccl: {pxn: false}}\nmodel: qwen3.8-27b\n"
                                        "training: {seq_len: 128K}\n"),
            "(no error)");
}

TEST(Errors, WrongTypeInteger) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: abc\n"),
            "s.yaml:5:7: error: parallel.cp: expected an integer, got 'abc'\n"
            "    cp: abc\n"
            "        ^");
}

TEST(Errors, WrongTypeBoolean) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {sequence_parallel: maybe}\n"),
            "s.yaml:4:31: error: parallel.sequence_parallel: expected true or false, got 'maybe'\n"
            "  parallel: {sequence_parallel: maybe}\n"
            "                                ^");
}

TEST(Errors, WrongTypeMapping) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: 128K\n"),
            "s.yaml:3:11: error: training: expected a mapping, got '128K'\n"
            "  training: 128K\n"
            "            ^");
}

TEST(Errors, WrongTypeList) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, documents: 64K}\n"),
            "s.yaml:3:38: error: training.documents: expected a list of document lengths such as [32K, 96K] or "
            "a mapping {distribution: uniform|lognormal, mean, seed}, got '64K'\n"
            "  training: {seq_len: 128K, documents: 64K}\n"
            "                                       ^");
}

TEST(Errors, MissingRequiredKey) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training:\n  micro_batch: 2\n"),
            "s.yaml:3:1: error: training: missing required key 'seq_len'\n"
            "  training:\n"
            "  ^");
}

TEST(Errors, MissingRequiredTopLevelKey) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: dgx-h100\ntraining: {seq_len: 128K}\n"),
            "s.yaml:1:1: error: missing required key 'model'\n"
            "  platform: dgx-h100\n"
            "  ^");
}

TEST(Errors, EmptyFile) {
  EXPECT_EQ(cpsim::test::scenario_error(""),
            "s.yaml:1:1: error: missing required key 'platform'\n"
            "  \n"
            "  ^");
}

TEST(Errors, ControlCharacterInTheText) {
  // A raw NUL inside a quoted string: yaml-cpp kept it, and a sweep value holding it did not
  // parse back from its own --set text (fuzz_sweep). Escapes stay allowed.
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "name: \"a" + std::string(1, '\0') + "b\"\n"),
            "s.yaml:3:9: error: invalid YAML: control character 0x00 (only tab, line feed and carriage "
            "return are allowed; write it as an escape such as \\u0001 in a double-quoted string)\n"
            "  name: \"a?b\"\n"
            "          ^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "name: \"a\\u0001b\"\ntraining: {seq_len: 128K}\n"), "(no error)");
}

TEST(Errors, NegativeSize) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {dp_bucket: -25MB}\n"),
            "s.yaml:4:23: error: parallel.dp_bucket: negative value '-25MB' is not allowed\n"
            "  parallel: {dp_bucket: -25MB}\n"
            "                        ^");
}

TEST(Errors, ZeroSize) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {dp_bucket: 0MB}\n"),
            "s.yaml:4:23: error: parallel.dp_bucket: must be > 0, got 0MB\n"
            "  parallel: {dp_bucket: 0MB}\n"
            "                        ^");
}

TEST(Errors, ZeroSequence) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 0}\n"),
            "s.yaml:3:21: error: training.seq_len: must be >= 1, got 0\n"
            "  training: {seq_len: 0}\n"
            "                      ^");
}

TEST(Errors, ZeroDegree) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {tp: 0}\n"),
            "s.yaml:4:16: error: parallel.tp: must be >= 1, got 0\n"
            "  parallel: {tp: 0}\n"
            "                 ^");
}

TEST(Errors, NegativeFactor) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nperturb:\n  slow_gpus: {3: -1.2}\n"),
            "s.yaml:5:18: error: perturb.slow_gpus.3: must be > 0, got -1.2\n"
            "    slow_gpus: {3: -1.2}\n"
            "                   ^");
}

TEST(Errors, FractionOutOfRange) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nperturb: {interference: 1.5}\n"),
            "s.yaml:4:25: error: perturb.interference: must be <= 1, got 1.5\n"
            "  perturb: {interference: 1.5}\n"
            "                          ^");
}

TEST(Errors, NegativeCv) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nperturb: {jitter_cv: -0.1}\n"),
            "s.yaml:4:22: error: perturb.jitter_cv: must be >= 0, got -0.1\n"
            "  perturb: {jitter_cv: -0.1}\n"
            "                       ^");
}

TEST(Errors, BadUnit) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {dp_bucket: 25Mb}\n"),
            "s.yaml:4:23: error: parallel.dp_bucket: unknown unit 'Mb' in '25Mb'; allowed: B, KB, kB, MB, GB, TB, "
            "PB, KiB, MiB, GiB, TiB, PiB\n"
            "  parallel: {dp_bucket: 25Mb}\n"
            "                        ^");
}

TEST(Errors, BadTokenCount) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128KB}\n"),
            "s.yaml:3:21: error: training.seq_len: unknown unit 'KB' in '128KB'; allowed: k, K, Ki, M, Mi, G, Gi\n"
            "  training: {seq_len: 128KB}\n"
            "                      ^");
}

TEST(Errors, EnumValueNotAllowed) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n  attention:\n    scheme: rign\n"),
            "s.yaml:7:13: error: parallel.attention.scheme: unknown value 'rign' (did you mean 'ring'?); "
            "allowed: ring, allgather, ulysses, usp, double-ring\n"
            "      scheme: rign\n"
            "              ^");
}

TEST(Errors, EnumValueNoSuggestion) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, recompute: sometimes}\n"),
            "s.yaml:3:38: error: training.recompute: unknown value 'sometimes'; allowed: none, selective, full\n"
            "  training: {seq_len: 128K, recompute: sometimes}\n"
            "                                       ^");
}

TEST(Errors, UnknownPlatformPreset) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: dgx-h1000\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"),
            "s.yaml:1:11: error: platform: unknown platform preset 'dgx-h1000'; known: dgx-a100, dgx-h100, "
            "gb200-nvl72, h100-cluster, hgx-h200, hgx-h800, l40s-pcie (searched " +
                data_dir() + "/platforms/); did you mean 'dgx-h100'?\n"
                "  platform: dgx-h1000\n"
                "            ^");
}

TEST(Errors, UnknownModelPreset) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: dgx-h100\nmodel: {preset: llama5}\ntraining: {seq_len: 128K}\n"),
            "s.yaml:2:17: error: model.preset: unknown model preset 'llama5'; known: deepseek-v3, glm-4.5-air, llama2-7b, llama3-405b, "
            "llama3-70b, llama3-8b, mixtral-8x7b, qwen3-30b-a3b, qwen3.8-27b (searched " +
                data_dir() + "/scenarios/models/)\n"
                "  model: {preset: llama5}\n"
                "                  ^");
}

TEST(Errors, UnknownGpu) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: dgx-h100, gpu: h100-sxn}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"),
            "s.yaml:1:35: error: platform.gpu: unknown GPU 'h100-sxn' (did you mean 'h100-sxm'?); known: "
            "a100-sxm, h100-sxm, h800-sxm, h200-sxm, b200, gb200, l40s (from " +
                data_dir() + "/platforms/gpus.yaml)\n"
                "  platform: {preset: dgx-h100, gpu: h100-sxn}\n"
                "                                    ^");
}

TEST(Errors, PlatformTooSmall) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n  dp: 2\n"),
            "s.yaml:4:1: error: parallel: tp*cp*pp*dp = 1*8*1*2 = 16 GPUs, but platform 'dgx-h100' has 8 GPUs "
            "(nodes 1 x gpus_per_node 8)\n"
            "  parallel:\n"
            "  ^");
}

TEST(Errors, UlyssesHeadsNotDivisible) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nodes: 2}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"
                "parallel:\n  cp: 16\n  attention: {scheme: ulysses}\n"),
            "s.yaml:5:7: error: parallel.cp: model 'qwen3.8-27b' heads_q 24 is not divisible by the Ulysses "
            "degree 16 (parallel.cp with scheme ulysses)\n"
            "    cp: 16\n"
            "        ^");
}

TEST(Errors, UlyssesKvHeadsWithoutReplication) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n"
                        "  attention: {scheme: ulysses, replicate_kv_heads: false}\n"),
            "s.yaml:6:52: error: parallel.attention.replicate_kv_heads: model 'qwen3.8-27b' heads_kv 4 is not "
            "divisible by the Ulysses degree 8 (parallel.cp with scheme ulysses) and replicate_kv_heads is false\n"
            "    attention: {scheme: ulysses, replicate_kv_heads: false}\n"
            "                                                     ^");
}

TEST(Errors, UspNeedsDegree) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n  attention: {scheme: usp}\n"),
            "s.yaml:6:3: error: parallel.attention: scheme usp needs parallel.attention.ulysses_degree (the "
            "head-split degree; the ring degree is cp / ulysses_degree)\n"
            "    attention: {scheme: usp}\n"
            "    ^");
}

TEST(Errors, UspDegreeMustDivideCp) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: 8\n"
                        "  attention: {scheme: usp, ulysses_degree: 3}\n"),
            "s.yaml:6:44: error: parallel.attention.ulysses_degree: ulysses_degree 3 does not divide parallel.cp = 8\n"
            "    attention: {scheme: usp, ulysses_degree: 3}\n"
            "                                             ^");
}

TEST(Errors, SeqLenZigZag) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training:\n  seq_len: 131080\nparallel: {cp: 8}\n"),
            "s.yaml:4:12: error: training.seq_len: seq_len 131080 is not divisible by 2*parallel.cp = 16 "
            "(layout zigzag splits the sequence into 2*cp chunks)\n"
            "    seq_len: 131080\n"
            "             ^");
}

TEST(Errors, SeqLenContiguous) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 131076}\nparallel: {cp: 8, attention: {layout: contiguous}}\n"),
            "s.yaml:3:21: error: training.seq_len: seq_len 131076 is not divisible by parallel.cp = 8 (layout "
            "contiguous splits the sequence into cp blocks)\n"
            "  training: {seq_len: 131076}\n"
            "                      ^");
  // 131,080 = 8 x 16,385: fine for contiguous blocks, not for 2*cp zig-zag chunks.
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 131080}\nparallel: {cp: 8, attention: {layout: contiguous}}\n"),
            "(no error)");
}

TEST(Errors, SeqLenTooLong) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 2000G}\n"),
            "s.yaml:3:21: error: training.seq_len: seq_len 2000G exceeds the limit of 2^40 tokens\n"
            "  training: {seq_len: 2000G}\n"
            "                      ^");
}

TEST(Errors, TooManyGpus) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: {preset: h100-cluster, nodes: 200000}\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\n"),
            "s.yaml:1:41: error: platform.nodes: nodes x gpus_per_node = 200000 x 8 = 1600000 GPUs exceeds the "
            "limit of 1000000\n"
            "  platform: {preset: h100-cluster, nodes: 200000}\n"
            "                                          ^");
}

TEST(Errors, DocumentsMustSumToSeqLen) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training:\n  seq_len: 128K\n  documents: [64K, 32K]\n"),
            "s.yaml:5:14: error: training.documents: document lengths sum to 98304 tokens but training.seq_len "
            "is 131072\n"
            "    documents: [64K, 32K]\n"
            "               ^");
}

TEST(Errors, SlowGpuRankOutsideWorld) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {cp: 8}\nperturb:\n  slow_gpus:\n    9: 1.2\n"),
            "s.yaml:7:5: error: perturb.slow_gpus.9: GPU rank 9 is outside the 8 GPUs of parallel.tp*cp*pp*dp\n"
            "      9: 1.2\n"
            "      ^");
}

TEST(Errors, DuplicateKey) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nmodel: llama3-8b\n"),
            "s.yaml:4:1: error: model: duplicate key 'model' (first given on line 2)\n"
            "  model: llama3-8b\n"
            "  ^");
}

TEST(Errors, OrderNotAPermutation) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nparallel: {order: tp-cp-cp-dp}\n"),
            "s.yaml:4:19: error: parallel.order: expected a permutation of tp, cp, pp, dp (innermost first) such "
            "as tp-cp-pp-dp, got 'tp-cp-cp-dp'\n"
            "  parallel: {order: tp-cp-cp-dp}\n"
            "                    ^");
}

TEST(Errors, YamlSyntaxError) {
  EXPECT_EQ(file_err(kData + "syntax-error.yaml"),
            kData + "syntax-error.yaml:4:10: error: invalid YAML: illegal map value\n"
                    "    seq_len: 128K\n"
                    "           ^");
}

TEST(Errors, YamlSyntaxErrorAtEnd) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K\n"),
            "s.yaml:4:1: error: invalid YAML: end of map flow not found\n"
            "  \n"
            "  ^");
}

TEST(Errors, MissingScenarioFile) {
  EXPECT_EQ(file_err(kData + "no-such-scenario.yaml"),
            kData + "no-such-scenario.yaml: error: cannot read scenario file: No such file or directory");
}

TEST(Errors, MissingPlatformFile) {
  EXPECT_EQ(file_err(kData + "missing-platform.yaml"),
            kData + "missing-platform.yaml:2:11: error: platform: cannot read platform file '" + kData +
                "no-such-platform.yaml': No such file or directory\n"
                "  platform: no-such-platform.yaml\n"
                "            ^");
}

TEST(Errors, ErrorInPresetReportsPresetFile) {
  // The bad value lives in the platform file the scenario names: the message points there.
  EXPECT_EQ(file_err(kData + "uses-bad-platform.yaml"),
            kData + "bad-platform.yaml:6:17: error: intra.nvlink.efficiency: must be <= 1, got 1.3\n"
                    "      efficiency: 1.3\n"
                    "                  ^");
}

TEST(Errors, InputErrorFields) {
  try {
    parse_scenario(kHead + "training: {seq_len: 128K}\nparallel:\n  cp: abc\n", "s.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    EXPECT_EQ(e.line(), 5);
    EXPECT_EQ(e.col(), 7);
    EXPECT_EQ(e.yaml_path(), "parallel.cp");
    EXPECT_EQ(e.reason(), "expected an integer, got 'abc'");
  }
}

TEST(Errors, SetBadValue) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"parallel.cp=abc"}),
            "<--set>:1:13: error: parallel.cp: expected an integer, got 'abc'\n"
            "  parallel.cp=abc\n"
            "              ^");
}

TEST(Errors, SetUnknownKey) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"parallel.attention.shceme=ring"}),
            "<--set>:1:20: error: parallel.attention.shceme: unknown key 'shceme' (did you mean 'scheme'?)\n"
            "  parallel.attention.shceme=ring\n"
            "                     ^");
}

TEST(Errors, SetMalformed) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"parallel.cp"}),
            "<--set>:1:1: error: expected key.path=value, got 'parallel.cp'\n"
            "  parallel.cp\n"
            "  ^");
}

TEST(Errors, SetEmptyValue) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"parallel.cp="}),
            "<--set>:1:13: error: parallel.cp: expected an integer, got nothing\n"
            "  parallel.cp=\n"
            "              ^");
}

TEST(Errors, SetBadYaml) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"training.documents=[64K, 64K"}),
            "<--set>:1:20: error: invalid YAML: end of sequence flow not found\n"
            "  training.documents=[64K, 64K\n"
            "                     ^");
}

TEST(Errors, SetThroughAScalar) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"training.seq_len.x=1"}),
            "<--set>:1:18: error: training.seq_len.x: cannot set 'x': 'training.seq_len' is '128K', not a mapping\n"
            "  training.seq_len.x=1\n"
            "                   ^");
}

TEST(Errors, SetCrossCheckPointsAtOverride) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n", {"parallel.cp=16"}),
            "<--set>:1:1: error: parallel: tp*cp*pp*dp = 1*16*1*1 = 16 GPUs, but platform 'dgx-h100' has 8 GPUs "
            "(nodes 1 x gpus_per_node 8)\n"
            "  parallel.cp=16\n"
            "  ^");
}

// yaml-cpp hazards: each must end in an InputError, never a hang, an abort or a silent default.
TEST(Errors, StrayCommaIsASyntaxError) {
  // YAML::LoadAll loops forever here and YAML::Load returns an empty document.
  EXPECT_EQ(cpsim::test::scenario_error(",platform: dgx-h100\n"),
            "s.yaml:1:1: error: invalid YAML: unexpected ','\n"
            "  ,platform: dgx-h100\n"
            "  ^");
}

TEST(Errors, TwoDocuments) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n---\nname: second\n"),
            "s.yaml:4:1: error: expected one YAML document, found more (remove the '---')\n"
            "  ---\n"
            "  ^");
}

TEST(Errors, AliasExpansionIsCapped) {
  std::string text = "a: &a [1,1,1,1,1,1,1,1,1,1]\n";
  const char* names = "abcdefg";
  for (int i = 1; i < 7; ++i) {
    text += std::string(1, names[i]) + ": &" + names[i] + " [";
    for (int j = 0; j < 10; ++j) text += std::string(j ? "," : "") + "*" + names[i - 1];
    text += "]\n";
  }
  EXPECT_EQ(cpsim::test::scenario_error(text),
            "s.yaml:6:29: error: the document expands to more than 1000000 values (aliases?)\n"
            "  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
            "                              ^");
}

TEST(Errors, AliasesWork) {
  EXPECT_EQ(cpsim::test::scenario_error("platform: &p dgx-h100\nmodel: qwen3.8-27b\ntraining: {seq_len: 128K}\nname: *p\n"), "(no error)");
}

TEST(Errors, NonScalarKey) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\n[1, 2]: 3\n"),
            "s.yaml:4:1: error: mapping keys must be plain text, not a list\n"
            "  [1, 2]: 3\n"
            "  ^");
}

TEST(Errors, DataParallelKeysNeedWhatMegatronAndFsdpNeed) {
  const std::string head = kHead + "training: {seq_len: 128K}\n";
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, overlap_param_gather: true}\n"),
            "s.yaml:4:41: error: parallel.overlap_param_gather: true needs parallel.overlap_grad_reduce: true "
            "(Megatron requires --overlap-grad-reduce for --overlap-param-gather)\n"
            "  parallel: {dp: 8, overlap_param_gather: true}\n"
            "                                          ^");
  EXPECT_EQ(cpsim::test::scenario_error(
                head + "parallel: {dp: 8, overlap_grad_reduce: true, overlap_param_gather: true, zero_stage: 0}\n"),
            "s.yaml:4:68: error: parallel.overlap_param_gather: true needs parallel.zero_stage 1 or 2 (Megatron's "
            "distributed optimizer), got 0\n"
            "  parallel: {dp: 8, overlap_grad_reduce: true, overlap_param_gather: true, zero_stage: 0}\n"
            "                                                                     ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, align_param_gather: true}\n"),
            "s.yaml:4:39: error: parallel.align_param_gather: true needs parallel.overlap_param_gather: true (it "
            "sets when the overlapped gathers start)\n"
            "  parallel: {dp: 8, align_param_gather: true}\n"
            "                                        ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, grad_reduce_dtype: fp16}\n"),
            "s.yaml:4:38: error: parallel.grad_reduce_dtype: unknown value 'fp16'; allowed: fp32, bf16\n"
            "  parallel: {dp: 8, grad_reduce_dtype: fp16}\n"
            "                                       ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, reshard_after_forward: never}\n"),
            "s.yaml:4:42: error: parallel.reshard_after_forward: applies to FSDP (zero_stage 3), got zero_stage 1\n"
            "  parallel: {dp: 8, reshard_after_forward: never}\n"
            "                                           ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, zero_stage: 3, overlap_grad_reduce: true}\n"),
            "s.yaml:4:55: error: parallel.overlap_grad_reduce: applies to zero_stage 0-2 (Megatron's DDP); FSDP "
            "(zero_stage 3) reduce-scatters each block's gradients as its backward ends by itself\n"
            "  parallel: {dp: 8, zero_stage: 3, overlap_grad_reduce: true}\n"
            "                                                        ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, dp_bucket: auto, overlap_grad_reduce: true}\n"),
            "(no error)");
  // (the default policy, as a result's echo writes it, is no error at any stage)
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, reshard_after_forward: default}\n"), "(no error)");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, dp_replicate: 2}\n"),
            "s.yaml:4:33: error: parallel.dp_replicate: applies to FSDP (zero_stage 3: HSDP replicates FSDP's shard groups), got zero_stage 1\n"
            "  parallel: {dp: 8, dp_replicate: 2}\n"
            "                                  ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, zero_stage: 3, dp_replicate: 3}\n"),
            "s.yaml:4:48: error: parallel.dp_replicate: expected a divisor of parallel.dp (8: dp_replicate x shard degree), got 3\n"
            "  parallel: {dp: 8, zero_stage: 3, dp_replicate: 3}\n"
            "                                                 ^");
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, zero_stage: 3, dp_replicate: 2}\n"), "(no error)");
  // (1, as a result's echo writes it, is no error at any stage)
  EXPECT_EQ(cpsim::test::scenario_error(head + "parallel: {dp: 8, dp_replicate: 1}\n"), "(no error)");
}

TEST(Errors, RecomputeAndOffloadKeysFollowMegatronsRules) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, recompute: none, recompute_layers: 4}\n"),
            "s.yaml:3:62: error: training.recompute_layers: needs training.recompute: full (Megatron's "
            "--recompute-num-layers applies to --recompute-granularity full)\n"
            "  training: {seq_len: 128K, recompute: none, recompute_layers: 4}\n"
            "  " + std::string(61, ' ') + "^");
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, offload_layers: 4}\n"),
            "s.yaml:3:43: error: training.offload_layers: needs training.recompute: none (Megatron: CPU offloading "
            "does not work when activation recomputation is enabled)\n"
            "  training: {seq_len: 128K, offload_layers: 4}\n"
            "                                            ^");
}

TEST(Errors, TorchtitanSelectiveAcOptionAsTorchtitanReadsIt) {
  auto has = [](const std::string& err, const std::string& part) { return err.find(part) != std::string::npos; };
  const std::string llama = "platform: dgx-h100\nmodel: llama3-8b\n";
  EXPECT_EQ(cpsim::test::scenario_error(llama + "training: {seq_len: 8K, recompute: selective, selective_ac_option: op}\n"),
            "(no error)");
  EXPECT_EQ(cpsim::test::scenario_error(llama + "training: {seq_len: 8K, recompute: selective, selective_ac_option: 2}\n"),
            "(no error)");
  const std::string full = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, recompute: full, selective_ac_option: op}\n");
  EXPECT_TRUE(has(full, "s.yaml:3:") && has(full, "training.selective_ac_option: needs training.recompute: selective")) << full;
  const std::string bad = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, recompute: selective, selective_ac_option: 0}\n");
  EXPECT_TRUE(has(bad, "training.selective_ac_option")) << bad;
  const std::string word = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, recompute: selective, selective_ac_option: layer}\n");
  EXPECT_TRUE(has(word, "expected 'op' or a positive integer")) << word;
  // The anchor model has linear-attention layers: the op policy's seven-matmul block is not theirs.
  const std::string lin = cpsim::test::scenario_error(kHead + "training: {seq_len: 128K, recompute: selective, selective_ac_option: op}\nparallel:\n  cp: 8\n");
  EXPECT_TRUE(has(lin, "op applies to dense full-attention models")) << lin;
}

TEST(Errors, OptimizerCpuOffloadAsMegatronReadsIt) {
  auto has = [](const std::string& err, const std::string& part) { return err.find(part) != std::string::npos; };
  const std::string llama = "platform: dgx-h100\nmodel: llama3-8b\n";
  EXPECT_EQ(cpsim::test::scenario_error(llama + "training: {seq_len: 8K, optimizer_cpu_offload: true, optimizer_offload_fraction: 0.5}\n"),
            "(no error)");
  const std::string alone = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, optimizer_offload_fraction: 0.5}\n");
  EXPECT_TRUE(has(alone, "training.optimizer_offload_fraction: needs training.optimizer_cpu_offload: true")) << alone;
  const std::string big = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, optimizer_cpu_offload: true, optimizer_offload_fraction: 1.5}\n");
  EXPECT_TRUE(has(big, "expected a fraction from 0 to 1")) << big;
  const std::string fsdp = cpsim::test::scenario_error(llama + "training: {seq_len: 8K, optimizer_cpu_offload: true}\nparallel: {dp: 8, zero_stage: 3}\n");
  EXPECT_TRUE(has(fsdp, "training.optimizer_cpu_offload: applies to Megatron's optimizers")) << fsdp;
}

TEST(Errors, AllocatorUnknownKeyNamesTheAllowed) {
  EXPECT_EQ(cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nmemory:\n  allocator: {expandable: true}\n"),
            "s.yaml:5:15: error: memory.allocator.expandable: unknown key 'expandable'; allowed: "
            "expandable_segments, fragmentation\n"
            "    allocator: {expandable: true}\n"
            "                ^");
}

TEST(Errors, AllocatorFragmentationIsAShareBelowOne) {
  const std::string err =
      cpsim::test::scenario_error(kHead + "training: {seq_len: 128K}\nmemory: {allocator: {fragmentation: 1.5}}\n");
  EXPECT_NE(err.find("s.yaml:4:37: error: memory.allocator.fragmentation: "), std::string::npos) << err;
  EXPECT_NE(err.find("below 0.9"), std::string::npos) << err;
}

}  // namespace CPSIM_TEST_TU
