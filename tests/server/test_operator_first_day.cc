// What an operator meets on day one, with the real binary: a second server on a used port (gRPC
// or metrics) fails at start-up naming the address; out-of-range ports are refused naming the
// field; --version prints the version; the start-up log says what it loads before loading it,
// and how many threads it runs; the CPU budget follows the affinity mask and the cgroup quota.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "model/synthetic.h"
#include "runtime/cpu_budget.h"
#include "server_process.h"

namespace kvserve {
namespace {

std::string tiny_model() {
  static const std::string path = [] {
    std::string p = std::string(KVSERVE_BINARY_DIR) + "/test-operator.gguf";
    write_synthetic_model({.dim = 32, .layers = 1, .heads = 2, .kv_heads = 2, .ffn = 32, .vocab = 300,
                           .context = 256, .seed = 3},
                          p);
    return p;
  }();
  return path;
}

struct Exit {
  int code = -1;
  std::string output;
};

// Runs the server binary with args to its exit (killed after `timeout`), stdout and stderr together.
Exit run_to_exit(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const std::string out = std::string(KVSERVE_BINARY_DIR) + "/test-operator-" + std::to_string(getpid()) + ".log";
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(out.c_str(), "w");
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    std::vector<std::string> all = {KVSERVE_SERVER_BIN};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Exit e;
  const auto end = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  e.output.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(out);
  return e;
}

TEST(Operator, SecondServerOnAUsedPortFailsNamingTheAddress) {
  testing::ServerProcess first({"--model", tiny_model(), "--set", "server.metrics_listen=\"127.0.0.1:0\""});
  ASSERT_TRUE(first.started()) << first.log();
  const Exit second = run_to_exit({"--model", tiny_model(), "--listen", first.address(), "--set",
                                   "server.metrics_listen=\"\""});
  EXPECT_NE(second.code, 0) << second.output;
  EXPECT_NE(second.output.find("cannot listen on " + first.address()), std::string::npos) << second.output;

  std::ifstream mp(first.port_file() + ".metrics");
  int metrics_port = 0;
  ASSERT_TRUE(mp >> metrics_port);
  const std::string maddr = "127.0.0.1:" + std::to_string(metrics_port);
  const Exit third = run_to_exit({"--model", tiny_model(), "--listen", "127.0.0.1:0", "--set",
                                  "server.metrics_listen=\"" + maddr + "\""});
  EXPECT_NE(third.code, 0) << third.output;
  EXPECT_NE(third.output.find("server.metrics_listen: cannot listen on " + maddr), std::string::npos) << third.output;
}

TEST(Operator, OutOfRangePortsAreRefusedNamingTheField) {
  const Exit grpc = run_to_exit({"--model", tiny_model(), "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(grpc.code, 2) << grpc.output;
  EXPECT_NE(grpc.output.find("server.listen"), std::string::npos) << grpc.output;
  EXPECT_NE(grpc.output.find("127.0.0.1:99999"), std::string::npos) << grpc.output;
  const Exit metrics = run_to_exit({"--model", tiny_model(), "--set", "server.metrics_listen=\"127.0.0.1:65536\""});
  EXPECT_EQ(metrics.code, 2) << metrics.output;
  EXPECT_NE(metrics.output.find("server.metrics_listen"), std::string::npos) << metrics.output;
}

// "kvserve 0.8.0 (git describe)": the project's version and the commit it was built from.
std::string version_line() {
  const Exit v = run_to_exit({"--version"});
  EXPECT_EQ(v.code, 0) << v.output;
  return v.output.substr(0, v.output.find('\n'));
}

TEST(Operator, VersionFlag) {
  const std::string v = version_line();
  EXPECT_EQ(v.rfind(std::string("kvserve ") + KVSERVE_PROJECT_VERSION + " (", 0), 0u) << v;
  EXPECT_EQ(v.back(), ')') << v;
}

// Before the model loads, the log names the file, its size, architecture and tensor types;
// then the load time, the thread count and why, and the version.
TEST(Operator, StartUpSaysWhatItLoadsFirst) {
  testing::ServerProcess s({"--model", tiny_model(), "--set", "server.metrics_listen=\"\""});
  ASSERT_TRUE(s.started()) << s.log();
  const std::string log = s.log();
  const size_t loading = log.find("loading model " + tiny_model());
  const size_t loaded = log.find("model loaded and cache allocated in");
  ASSERT_NE(loading, std::string::npos) << log;
  ASSERT_NE(loaded, std::string::npos) << log;
  EXPECT_LT(loading, loaded);
  // The threads and kernels are said before the load too.
  const size_t threads = log.find(" compute threads (");
  ASSERT_NE(threads, std::string::npos) << log;
  EXPECT_LT(threads, loaded);
  EXPECT_NE(log.find("architecture 'llama'"), std::string::npos) << log;
  EXPECT_NE(log.find("F32 100%"), std::string::npos) << log;
  EXPECT_NE(log.find(version_line() + " starting"), std::string::npos) << log;
  EXPECT_NE(log.find("compute threads ("), std::string::npos) << log;
  EXPECT_NE(log.find("affinity mask"), std::string::npos) << log;
  EXPECT_NE(log.find(" MiB"), std::string::npos) << log;  // a small cache is not "0.00 GiB"
  EXPECT_EQ(log.find("0.00 GiB"), std::string::npos) << log;
}

// cgroup v2 and v1 files under a fake root: the tightest quota on the process's path counts,
// rounded up, never above the affinity mask.
TEST(CpuBudget, AffinityAndCgroupQuota) {
  const std::filesystem::path root = std::filesystem::path(KVSERVE_BINARY_DIR) / "test-cgroup";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "kubepods/pod1/ctr");
  std::filesystem::create_directories(root / "cpu/docker/abc");
  std::ofstream(root / "proc-v2") << "0::/kubepods/pod1/ctr\n";
  std::ofstream(root / "kubepods/pod1/ctr/cpu.max") << "max 100000\n";
  std::ofstream(root / "kubepods/pod1/cpu.max") << "150000 100000\n";  // 1.5 CPUs on the pod
  const CpuBudget none = cpu_budget(root.string(), (root / "missing").string());
  EXPECT_EQ(none.quota_cpus, 0);
  EXPECT_EQ(none.threads, none.affinity_cpus);
  EXPECT_GE(none.affinity_cpus, 1);
  const CpuBudget v2 = cpu_budget(root.string(), (root / "proc-v2").string());
  EXPECT_DOUBLE_EQ(v2.quota_cpus, 1.5);
  EXPECT_EQ(v2.threads, std::min(2, v2.affinity_cpus));
  EXPECT_NE(v2.reason.find("cpu.max"), std::string::npos) << v2.reason;
  std::ofstream(root / "proc-v1") << "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n";
  std::ofstream(root / "cpu/docker/abc/cpu.cfs_quota_us") << "50000\n";
  std::ofstream(root / "cpu/docker/abc/cpu.cfs_period_us") << "100000\n";
  const CpuBudget v1 = cpu_budget(root.string(), (root / "proc-v1").string());
  EXPECT_DOUBLE_EQ(v1.quota_cpus, 0.5);
  EXPECT_EQ(v1.threads, 1);
}

}  // namespace
}  // namespace kvserve
