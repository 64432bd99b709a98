// Encoders from float to ggml's block types: the tensor-type table's from_float for every type it
// decodes. The algorithms are those of ggml's reference quantizers (what llama-quantize runs
// without an importance matrix): a scale (and minimum) per block from the block's extremes for
// the 32-value types; for the K types a weighted search of each sub-block's scale and minimum,
// then the scales themselves quantized against one super-block factor.
#pragma once

#include <cstdint>

namespace kvserve::quant {

// src: [n] floats, n a multiple of the type's block size; dst: n / block_size blocks.
void encode_q4_0(const float* src, void* dst, int64_t n);
void encode_q4_1(const float* src, void* dst, int64_t n);
void encode_q5_0(const float* src, void* dst, int64_t n);
void encode_q5_1(const float* src, void* dst, int64_t n);
void encode_q8_0(const float* src, void* dst, int64_t n);
// IQ4_NL as llama-quantize writes it without an importance matrix: per block, the scale of
// least x²-weighted squared error among 16 candidates, each index the nearest level.
void encode_iq4_nl(const float* src, void* dst, int64_t n);
// MXFP4 as llama-quantize writes it: the scale 2^(floor(log2 max|x|) - 2), each code the nearest
// level (the first on a tie).
void encode_mxfp4(const float* src, void* dst, int64_t n);
void encode_q2_k(const float* src, void* dst, int64_t n);
void encode_q3_k(const float* src, void* dst, int64_t n);
void encode_q4_k(const float* src, void* dst, int64_t n);
void encode_q5_k(const float* src, void* dst, int64_t n);
void encode_q6_k(const float* src, void* dst, int64_t n);

}  // namespace kvserve::quant
