#include "model/model.h"

#include "model/arch_spec.h"
#include "model/decoder_model.h"

namespace kvserve {

std::unique_ptr<Model> load_model(const GgufFile& f, const ModelLoadOptions& o) {
  const std::string arch = f.has("general.architecture") ? f.get("general.architecture").as_string("general.architecture")
                                                         : std::string("(none)");
  const KernelTable& kernels = o.kernels ? *o.kernels : kernel_table(best_supported_level());
  const ArchSpec* spec = find_arch_spec(arch);
  if (!spec)
    throw GgufError(f.path() + ": unsupported architecture '" + arch + "' (supported: " + implemented_architectures() + ")");
  // One decoder serves every spec; an architecture that needs more gets its own Model here.
  return std::make_unique<DecoderModel>(f, o.weights, kernels);
}

}  // namespace kvserve
