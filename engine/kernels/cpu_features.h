// The kernel sets one portable binary carries, and which of them this CPU can run. Chosen once
// at start-up (model.kernels, default the best supported); see kernel_table.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvserve {

enum class KernelLevel {
  kScalar,  // x86-64 baseline (SSE2): compiler-vectorised loops only
  kAvx2,    // AVX2 + FMA + F16C (Haswell and later, Zen)
  kAvx2Vnni,  // AVX2 + AVX-VNNI (Alder Lake and later client parts, Sapphire Rapids, Zen 5)
  kAvx512,  // AVX-512 F/BW/CD/DQ/VL (x86-64-v4: Skylake-SP and later, Zen 4)
};

const char* level_name(KernelLevel level);                       // "scalar", "avx2", "avx2_vnni", "avx512"
std::optional<KernelLevel> parse_level(const std::string& name);  // nothing if unknown
bool cpu_supports(KernelLevel level);
KernelLevel best_supported_level();
std::vector<KernelLevel> supported_levels();                     // lowest first

}  // namespace kvserve
