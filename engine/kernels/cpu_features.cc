#include "kernels/cpu_features.h"

namespace kvserve {
namespace {
constexpr KernelLevel kAllLevels[] = {KernelLevel::kScalar, KernelLevel::kAvx2, KernelLevel::kAvx2Vnni,
                                      KernelLevel::kAvx512};
}  // namespace

const char* level_name(KernelLevel level) {
  switch (level) {
    case KernelLevel::kScalar: return "scalar";
    case KernelLevel::kAvx2: return "avx2";
    case KernelLevel::kAvx2Vnni: return "avx2_vnni";
    case KernelLevel::kAvx512: return "avx512";
  }
  return "unknown";
}

std::optional<KernelLevel> parse_level(const std::string& name) {
  for (KernelLevel l : kAllLevels)
    if (name == level_name(l)) return l;
  return std::nullopt;
}

// The features each level's translation units are compiled for (CMakeLists: target pragmas of
// kernels/kernel_level.h), asked of cpuid through the compiler's builtins.
bool cpu_supports(KernelLevel level) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  switch (level) {
    case KernelLevel::kScalar: return true;
    case KernelLevel::kAvx2: return avx2;
    case KernelLevel::kAvx2Vnni: return avx2 && __builtin_cpu_supports("avxvnni");
    case KernelLevel::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

KernelLevel best_supported_level() {
  KernelLevel best = KernelLevel::kScalar;
  for (KernelLevel l : supported_levels()) best = l;
  return best;
}

std::vector<KernelLevel> supported_levels() {
  std::vector<KernelLevel> out;
  for (KernelLevel l : kAllLevels)
    if (cpu_supports(l)) out.push_back(l);
  return out;
}

}  // namespace kvserve
