// Nothing lost, nothing injected, nothing left running: one test per class of failure a careful
// and an adversarial user found (full disks and closed streams, injected YAML lines and pasted
// commands, planted symlinks, children left behind, unbounded or silently wrapped inputs).
// tests/faults/faults.py runs every subcommand under every fault; these pin one case of each.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/cli.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace CPSIM_TEST_TU {  // unique per file: tests/CMakeLists.txt compiles unity batches

namespace fs = std::filesystem;
using namespace cpsim::cli;

namespace {

constexpr const char* kConfig =
    R"({"model_type":"llama","num_hidden_layers":32,"hidden_size":4096,"num_attention_heads":32,)"
    R"("num_key_value_heads":8,"intermediate_size":14336,"vocab_size":128256})";

class HostileTest : public cpsim::test::TempDir {
 protected:
  void SetUp() override {
    TempDir::SetUp();
    write(dir_ / "tiny.yaml", kTinyScenario);
    write(dir_ / "config.json", kConfig);
  }
  std::string p(const std::string& name) const { return (dir_ / name).string(); }
  /// `cpsim ARGS`, run in the test's directory.
  Output cpsim(const std::string& args) const { return run("cd '" + dir_.string() + "' && " + kCpsim + " " + args); }
};

/// Pids alive (not zombies) in session `sid`.
std::vector<int> session_members(int sid) {
  std::vector<int> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string st;
    std::getline(f, st);
    const size_t close = st.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(st.substr(close + 2));
    std::string state;
    int ppid = 0, pgrp = 0, session = 0;
    rest >> state >> ppid >> pgrp >> session;
    if (state != "Z" && session == sid) out.push_back(std::stoi(name));
  }
  return out;
}

// ---- 1. lost output: never exit 0 with output lost, never a previous file destroyed -------------

TEST_F(HostileTest, LostOutputIsExitOneNamingIt) {
  // In a group: run() sends the group's stderr to the output, only stdout is redirected here.
  const Output full = run("{ " + kCpsim + " partition --seq 16K --cp 4 --layout zigzag >/dev/full; }");
  EXPECT_EQ(full.rc, 1) << full.text;
  EXPECT_NE(full.text.find("cannot write standard output: No space left on device"), std::string::npos) << full.text;
  const Output closed = run("{ " + kCpsim + " import hf " + p("config.json") + " >&-; }");
  EXPECT_EQ(closed.rc, 1) << closed.text;
  // -o naming the input: refused before any work, the input untouched.
  const Output onto_input = cpsim("import hf config.json -o config.json");
  EXPECT_EQ(onto_input.rc, 2) << onto_input.text;
  EXPECT_EQ(slurp(dir_ / "config.json"), kConfig);
  // A 250-byte name is legal; its temporary must be too.
  const std::string name(250, 'm');
  const Output long_name = cpsim("import hf config.json -o " + name);
  EXPECT_EQ(long_name.rc, 0) << long_name.text;
  EXPECT_TRUE(fs::is_regular_file(dir_ / name));
  // ulimit -f: a reported failure (not SIGXFSZ), no temporary left.
  const Output limited = run("cd '" + dir_.string() + "' && ulimit -f 1 && " + kCpsim +
                             " run tiny.yaml --set simulation.scope=step --set simulation.engine=simgrid --trace t.json");
  EXPECT_EQ(limited.rc, 1) << limited.text;
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// ---- 2. injection: user text stays data in written YAML and in printed commands ------------------

TEST_F(HostileTest, NamesAndKeysNeverBecomeYamlLines) {
  write(dir_ / "evil.json", std::string(kConfig).substr(0, std::string(kConfig).size() - 1) +
                                R"(,"x\nattention:\n  mask: full\ny":1})");
  const Output hf = cpsim("import hf evil.json -o m.yaml");
  ASSERT_EQ(hf.rc, 0) << hf.text;
  EXPECT_EQ(slurp(dir_ / "m.yaml").find("\nattention:"), std::string::npos) << slurp(dir_ / "m.yaml");
  EXPECT_EQ(hf.text.find("\nattention:"), std::string::npos) << hf.text;  // nor in the notes
  const Output mg = cpsim(
      "import megatron -o s.yaml -- --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --ffn-hidden-size 4096 "
      "--vocab-size 32000 --seq-length 4096 --platform dgx-h100 --nodes 1 --name $'x\\nmode: prefill' "
      "$'--bogus\\nmode: prefill'");
  ASSERT_EQ(mg.rc, 0) << mg.text;
  const std::string yaml = slurp(dir_ / "s.yaml");
  EXPECT_EQ(yaml.find("\nmode:"), std::string::npos) << yaml;
  const Output check = cpsim("check s.yaml");
  EXPECT_EQ(check.rc, 0) << check.text;
}

TEST_F(HostileTest, PrintedCommandsAreShellQuoted) {
  fs::copy_file(dir_ / "tiny.yaml", dir_ / "my $(touch X).yaml");
  const Output m = cpsim("memory 'my $(touch X).yaml'");
  ASSERT_EQ(m.rc, 0) << m.text;
  EXPECT_NE(m.text.find("cpsim run 'my $(touch X).yaml'"), std::string::npos) << m.text;
  // Pasting the printed line runs cpsim on that file, and nothing else.
  const size_t at = m.text.find("cpsim run 'my");
  std::string line = m.text.substr(at, m.text.find('\n', at) - at);
  const Output pasted = run("cd '" + dir_.string() + "' && " + line.replace(0, 5, kCpsim) + " -q");
  EXPECT_FALSE(fs::exists(dir_ / "X")) << pasted.text;
}

// ---- 3. files: a planted symlink is replaced, never followed; closed stderr lands nowhere -------

TEST_F(HostileTest, PlantedSymlinksAreNotFollowed) {
  write(dir_ / "sweep.yaml", "name: s\nbase: tiny.yaml\naxes:\n  training.seq_len: [4K, 8K]\n");
  write(dir_ / "victim", "precious\n");
  fs::create_directories(dir_ / "out" / "logs");
  fs::create_symlink(dir_ / "victim", dir_ / "out" / "results.csv");
  fs::create_symlink(dir_ / "victim", dir_ / "out" / "logs" / "0000.log");
  const Output s = cpsim("sweep sweep.yaml -o out -j 1 2>&-");
  EXPECT_EQ(s.rc, 0) << s.text;
  EXPECT_EQ(slurp(dir_ / "victim"), "precious\n");
  EXPECT_FALSE(fs::is_symlink(dir_ / "out" / "results.csv"));
  // With stderr closed the progress lines went nowhere, not into the lock file (fd 2).
  const std::string lock = slurp(dir_ / "out" / ".results.csv.lock");
  EXPECT_EQ(lock.find("sweep"), std::string::npos) << lock;
}

// ---- 4. children: SIGTERM kills and reaps them all, exit 143 ------------------------------------

TEST_F(HostileTest, TerminatedParentLeavesNoChildren) {
  const std::vector<std::string> argv_s = {kCpsim, "run", p("tiny.yaml"), "--set", "simulation.scope=step",
                                           "--samples", "16", "-j", "2"};
  std::vector<char*> argv;
  for (const auto& a : argv_s) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, kCpsim.c_str(), &fa, &attr, argv.data(), environ), 0);
  // Once it has children running (it took its signals before starting any), or 20 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until && session_members(pid).size() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 143 || WEXITSTATUS(status) == 0)) << status;
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < settle && !session_members(pid).empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(session_members(pid).empty());
  for (int left : session_members(pid)) ::kill(left, SIGKILL);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
}

// ---- 5. bounds before work: exit 2 with a clear message, never a hang, a crash or a wrap --------

TEST_F(HostileTest, BadInputsAreRefusedWithAPosition) {
  const Output seed = cpsim("partition --seq 16K --cp 4 --layout zigzag --doc-mean 4K --seed=-1");
  EXPECT_EQ(seed.rc, 2) << seed.text;
  const Output huge = cpsim("partition --seq 16K --cp 4 --layout zigzag --doc-mean 4K --seed 99999999999999999999");
  EXPECT_EQ(huge.rc, 2) << huge.text;
  const Output kv = cpsim("kernels price --platform dgx-h100 --kv-heads 64 --heads 32");
  EXPECT_EQ(kv.rc, 2) << kv.text;
  const Output jobs = cpsim("sweep tiny.yaml -j 100000");
  EXPECT_EQ(jobs.rc, 2) << jobs.text;
  std::string deep = R"({"model_type":"llama","x":)";
  for (int i = 0; i < 100000; ++i) deep += "[";
  for (int i = 0; i < 100000; ++i) deep += "]";
  write(dir_ / "deep.json", deep + "}");
  const Output d = cpsim("import hf deep.json");
  EXPECT_EQ(d.rc, 2) << d.text.substr(0, 300);
  EXPECT_NE(d.text.find("nesting deeper than 64"), std::string::npos) << d.text.substr(0, 300);
  write(dir_ / "big.json", "{\"model_type\": \"llama\",\n\"num_hidden_layers\": 1e400}");
  const Output big = cpsim("import hf big.json");
  EXPECT_EQ(big.rc, 2) << big.text;
  EXPECT_NE(big.text.find("big.json:2:"), std::string::npos) << big.text;
  write(dir_ / "dup.json", "{\"model_type\": \"llama\",\n\"hidden_size\": 1,\n\n\"hidden_size\": 2}");
  const Output dup = cpsim("import hf dup.json");
  EXPECT_EQ(dup.rc, 2) << dup.text;
  EXPECT_NE(dup.text.find("dup.json:4:"), std::string::npos) << dup.text;
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0644), 0);
  const Output fifo = run("cd '" + dir_.string() + "' && timeout 20 " + kCpsim + " run tiny.yaml --set platform=./fifo");
  EXPECT_EQ(fifo.rc, 2) << fifo.text;
  EXPECT_NE(fifo.text.find("FIFO"), std::string::npos) << fifo.text;
  const Output passwd = cpsim("run tiny.yaml --set platform=/etc/passwd");
  EXPECT_EQ(passwd.rc, 2) << passwd.text;
  EXPECT_EQ(passwd.text.find("root:x:0:0:root:/root"), passwd.text.rfind("root:x:0:0:root:/root")) << passwd.text;
}

// ---- 6. stale results: resume reuses a point only if it resolves to the scenario it ran --------

TEST_F(HostileTest, ResumeRerunsPointsWhoseBaseChanged) {
  write(dir_ / "sweep.yaml", "name: s\nbase: tiny.yaml\naxes:\n  training.seq_len: [4K, 8K]\n");
  ASSERT_EQ(cpsim("sweep sweep.yaml -o out -j 1 -q").rc, 0);
  const Output same = cpsim("sweep sweep.yaml -o out -j 1 --resume");
  EXPECT_NE(same.text.find("resuming: 2 of 2"), std::string::npos) << same.text;
  std::string base = kTinyScenario;
  base.replace(base.find("zigzag"), 6, "contiguous");
  write(dir_ / "tiny.yaml", base);
  const Output edited = cpsim("sweep sweep.yaml -o out -j 1 --resume");
  EXPECT_EQ(edited.rc, 0) << edited.text;
  EXPECT_NE(edited.text.find("resuming: 0 of 2"), std::string::npos) << edited.text;
}

TEST_F(HostileTest, PlanRanksTheSameTableAtAnyJobs) {
  // Everything but the line of work done and wall time ("runs: ..."), which may differ.
  auto table = [&](int jobs) {
    const Output o = run(kCpsim + " plan " + CPSIM_SOURCE_DIR + "/scenarios/quickstart.yaml --gpus 16 --budget 12 -j " +
                         std::to_string(jobs));
    EXPECT_EQ(o.rc, 0) << o.text;
    std::istringstream in(o.text);
    std::string out;
    for (std::string line; std::getline(in, line);)
      if (line.find("runs:") == std::string::npos) out += line + "\n";
    return out;
  };
  EXPECT_EQ(table(1), table(2));
}

}  // namespace
}  // namespace CPSIM_TEST_TU
