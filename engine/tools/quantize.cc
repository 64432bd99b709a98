// kvserve-quantize: converts a GGUF model's weights to a llama-quantize preset (Q4_K_M, Q8_0, ...),
// with llama-quantize's per-tensor rules; metadata and 1-D tensors are copied unchanged.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "gguf/quant_presets.h"

int main(int argc, char** argv) {
  CLI::App app{"Quantize a GGUF model's weights to a llama.cpp preset"};
  std::string in, out, preset_name;
  app.add_option("input", in, "source GGUF (F32, F16 or BF16 weights)")->required();
  app.add_option("output", out, "GGUF to write")->required();
  app.add_option("type", preset_name, "preset: " + kvserve::quant_preset_names())->required();
  CLI11_PARSE(app, argc, argv);
  const kvserve::QuantPreset* preset = kvserve::find_quant_preset(preset_name);
  if (!preset) {
    std::fprintf(stderr, "kvserve-quantize: unknown type '%s' (one of %s)\n", preset_name.c_str(),
                 kvserve::quant_preset_names().c_str());
    return 2;
  }
  try {
    kvserve::GgufFile file(in);
    kvserve::quantize_file(file, out, *preset);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-quantize: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "wrote %s (%s)\n", out.c_str(), preset->name);
  return 0;
}
