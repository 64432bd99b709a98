// What every weight matrix of one model shares: oneDNN's engine and stream, and the CPU kernel
// set chosen at load. Only the weights' implementations see oneDNN.
#pragma once

#include <dnnl.hpp>

#include <vector>

#include "kernels/kernel_table.h"
#include "weights/weight_arena.h"

namespace kvserve {

struct ComputeContext {
  explicit ComputeContext(const KernelTable& k) : kernels(&k) {}
  const KernelTable* kernels;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // True where the CPU multiplies BF16 natively (AVX-512 BF16 or AMX): BF16 weights can then
  // stay BF16 in memory, half the bytes each step streams.
  bool bf16_native = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) &
                      static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16)) ==
                     static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  // Weights held in their file's type (weights/quant_matrix.h).
  WeightArena arena;
  // Rows of such weights decoded to float for a prompt-sized GEMM: one buffer for every matrix,
  // as the engine runs one matrix at a time.
  std::vector<float> panel;
  // Activations rounded to 8 bits for the quantized weights' integer path (same reason).
  std::vector<uint8_t> activation_scratch;
};

}  // namespace kvserve
