#include "kernels/kernel_table.h"

#include <stdexcept>

namespace kvserve {
namespace scalar {
const KernelTable& table();
}
namespace avx2 {
const KernelTable& table();
}
namespace avx2_vnni {
const KernelTable& table();
}
namespace avx512 {
const KernelTable& table();
}

const KernelTable& kernel_table(KernelLevel level) {
  if (!cpu_supports(level)) throw std::runtime_error(std::string("this CPU cannot run the ") + level_name(level) + " kernels");
  switch (level) {
    case KernelLevel::kScalar: return scalar::table();
    case KernelLevel::kAvx2: return avx2::table();
    case KernelLevel::kAvx2Vnni: return avx2_vnni::table();
    case KernelLevel::kAvx512: return avx512::table();
  }
  return scalar::table();
}

}  // namespace kvserve
