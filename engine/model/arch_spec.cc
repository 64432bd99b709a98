#include "model/arch_spec.h"

namespace kvserve {
namespace {

// Every architecture this build runs. The defaults are llama's.
const std::vector<ArchSpec>& specs() {
  static const std::vector<ArchSpec> all = {
      ArchSpec{.name = "llama"},
  };
  return all;
}

}  // namespace

const ArchSpec* find_arch_spec(const std::string& architecture) {
  for (const ArchSpec& s : specs())
    if (s.name == architecture) return &s;
  return nullptr;
}

std::string implemented_architectures() {
  std::string out;
  for (const ArchSpec& s : specs()) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace kvserve
