#include "model/model.h"

#include "model/llama_model.h"

namespace kvserve {

std::unique_ptr<Model> load_model(const GgufFile& f, const ModelLoadOptions& o) {
  const std::string arch = f.has("general.architecture") ? f.get("general.architecture").as_string("general.architecture")
                                                         : std::string("(none)");
  const KernelTable& kernels = o.kernels ? *o.kernels : kernel_table(best_supported_level());
  if (arch == "llama") return std::make_unique<LlamaModel>(f, o.weights.keep_bf16, kernels);
  throw GgufError(f.path() + ": unsupported architecture '" + arch + "' (supported: llama)");
}

}  // namespace kvserve
