// Starts the real kvserve binary on a free loopback port for end-to-end tests, and stops it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kvserve::testing {

class ServerProcess {
 public:
  // args: extra command-line arguments (--model, --set ...). Waits until the port is bound.
  explicit ServerProcess(std::vector<std::string> args) {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("kvserve-e2e-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    port_file_ = (dir_ / "port").string();
    const std::string& port_file = port_file_;
    log_ = (dir_ / "server.log").string();
    // The HTTP API on a port of its own too (its default, 8000, would collide between tests);
    // a test's own --set server.http_listen comes later and wins.
    args.insert(args.begin(), {KVSERVE_SERVER_BIN, "--listen", "127.0.0.1:0", "--port-file", port_file, "--set",
                               "server.http_listen=\"127.0.0.1:0\""});
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::ifstream in(port_file);
      if (!(in >> port_)) port_ = 0;
      if (port_ == 0) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  bool started() const { return port_ != 0; }
  const std::string& port_file() const { return port_file_; }
  // The port the server wrote to its port file with this suffix (".http", ".metrics"), waiting
  // up to 2 s for it; 0 if none.
  int written_port(const std::string& suffix) const {
    int port = 0;
    for (int i = 0; i < 100 && port == 0; ++i) {
      std::ifstream in(port_file_ + suffix);
      if (!(in >> port)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return port;
  }
  pid_t pid() const { return pid_; }
  // Resident memory of the server process in KiB (from /proc), 0 if unknown.
  long rss_kib() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
    std::string key;
    long value = 0;
    while (in >> key) {
      if (key == "VmRSS:") {
        in >> value;
        return value;
      }
      in.ignore(1 << 12, '\n');
    }
    return 0;
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void signal(int sig) { kill(pid_, sig); }
  // Waits for the process to exit; returns its exit code (-1 on timeout or signal death).
  int wait_exit(std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  std::filesystem::path dir_;
  std::string log_;
  std::string port_file_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace kvserve::testing
