#include "runtime/cpu_budget.h"

#include <sched.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

namespace kvserve {
namespace {

// The quota in CPUs from cgroup v2's "cpu.max" ("max 100000" or "200000 100000"), 0 if none.
double v2_quota(const std::string& file) {
  std::ifstream in(file);
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  return std::stod(quota) / period;
}

// cgroup v1's cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us.
double v1_quota(const std::string& dir) {
  std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
  double quota = 0, period = 0;
  if (!(q >> quota) || !(p >> period) || quota <= 0 || period <= 0) return 0;
  return quota / period;
}

}  // namespace

CpuBudget cpu_budget(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  CpuBudget b;
  cpu_set_t set;
  CPU_ZERO(&set);
  b.affinity_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  std::string source;
  // The process's own cgroup, then each parent up to the root: the tightest quota counts.
  std::ifstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);) {
    // "0::/kubepods/pod1/ctr" (v2) or "4:cpu,cpuacct:/docker/abc" (v1).
    const size_t a = line.find(':'), c = line.find(':', a + 1);
    if (a == std::string::npos || c == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, c - a - 1);
    std::string path = line.substr(c + 1);
    const bool v2 = controllers.empty();
    if (!v2 && controllers.find("cpu") == std::string::npos) continue;
    for (;;) {
      const std::string dir = v2 ? cgroup_root + path : cgroup_root + "/cpu" + path;
      const double q = v2 ? v2_quota(dir + "/cpu.max") : v1_quota(dir);
      if (q > 0 && (b.quota_cpus == 0 || q < b.quota_cpus)) {
        b.quota_cpus = q;
        source = v2 ? "cpu.max" : "cpu.cfs_quota_us";
      }
      if (path.empty() || path == "/") break;
      path = path.substr(0, path.rfind('/'));
    }
  }
  b.threads = b.affinity_cpus;
  if (b.quota_cpus > 0) b.threads = std::min(b.threads, static_cast<int>(std::ceil(b.quota_cpus - 1e-9)));
  b.threads = std::max(1, b.threads);
  char text[160];
  if (b.quota_cpus > 0)
    std::snprintf(text, sizeof(text), "%d CPUs in the affinity mask, cgroup quota %.2f CPUs (%s)", b.affinity_cpus,
                  b.quota_cpus, source.c_str());
  else
    std::snprintf(text, sizeof(text), "%d CPUs in the affinity mask, no cgroup CPU quota", b.affinity_cpus);
  b.reason = text;
  return b;
}

}  // namespace kvserve
