// How many CPUs this process may really use: the CPUs of its affinity mask (taskset, a
// container's cpuset), capped by its cgroup's CPU quota (a Kubernetes CPU limit, docker --cpus),
// rounded up. The default for model.num_threads: a thread per CPU of the node would oversubscribe
// a container limited to two.
#pragma once

#include <string>

namespace kvserve {

struct CpuBudget {
  int affinity_cpus = 0;   // CPUs in the affinity mask
  double quota_cpus = 0;   // cgroup quota / period; 0: no quota
  int threads = 1;         // what to run: min(affinity, ceil(quota)), at least 1
  std::string reason;      // "8 CPUs in the affinity mask, cgroup quota 2.00 CPUs (cpu.max)"
};

// cgroup_root: where the cgroup file systems are mounted; proc_self_cgroup: the process's
// cgroup membership file (both parameters for tests).
CpuBudget cpu_budget(const std::string& cgroup_root = "/sys/fs/cgroup",
                     const std::string& proc_self_cgroup = "/proc/self/cgroup");

}  // namespace kvserve
