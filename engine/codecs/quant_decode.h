// Decoders from ggml's block layouts (codecs/quant_blocks.h) to float, in the order of operations
// of ggml's reference decoder, so that the floats are bit-for-bit those of llama.cpp and gguf-py
// (the sources that include this compile with -ffp-contract=off: a fused multiply-add would round
// differently). Static inline on purpose: each kernel level compiles its own copy, and the
// scalar copy is the tensor-type table's to_float.
#pragma once

#include <cstdint>
#include <cstring>

#include "codecs/quant_blocks.h"

namespace kvserve::quant {

// IEEE half to float, exactly, without branches (so the decoders' loops vectorize); static like
// everything here, so no level's copy is shared with another through the linker.
static inline float half_to_float(uint16_t h) {
#if defined(KVSERVE_HAS_F16C) && KVSERVE_HAS_F16C
  return _cvtsh_ss(h);  // exact, one instruction (the kernel sources include immintrin.h first)
#endif
  const uint32_t w = static_cast<uint32_t>(h) << 16, sign = w & 0x80000000u, two_w = w + w;
  uint32_t bits = (two_w >> 4) + (0xE0u << 23);
  float normalized, denormalized;
  std::memcpy(&normalized, &bits, 4);
  normalized *= 0x1.0p-112f;
  bits = (two_w >> 17) | (126u << 23);
  std::memcpy(&denormalized, &bits, 4);
  denormalized -= 0.5f;
  float picked = two_w < (1u << 27) ? denormalized : normalized;
  std::memcpy(&bits, &picked, 4);
  bits |= sign;
  std::memcpy(&picked, &bits, 4);
  return picked;
}

// n values from n / block_size blocks; dst: [n].
static inline void decode_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      dst[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

static inline void decode_q4_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d), m = half_to_float(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      dst[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

static inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

static inline void decode_q5_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) << 4) & 0x10, h1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      dst[j] = static_cast<float>(((b[i].qs[j] & 0xF) | h0) - 16) * d;
      dst[j + kQK / 2] = static_cast<float>(((b[i].qs[j] >> 4) | h1) - 16) * d;
    }
  }
}

static inline void decode_q5_1(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d), m = half_to_float(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int h0 = static_cast<int>((qh >> j) << 4) & 0x10, h1 = static_cast<int>(qh >> (j + 12)) & 0x10;
      dst[j] = static_cast<float>((b[i].qs[j] & 0xF) | h0) * d + m;
      dst[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) | h1) * d + m;
    }
  }
}

static inline void decode_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

static inline void decode_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = d * static_cast<float>(kIq4nlLevels[b[i].qs[j] & 0xF]);
      dst[j + kQK / 2] = d * static_cast<float>(kIq4nlLevels[b[i].qs[j] >> 4]);
    }
  }
}

static inline void decode_mxfp4(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = e8m0_half(b[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = static_cast<float>(kMxfp4Levels[b[i].qs[j] & 0xF]) * d;
      dst[j + kQK / 2] = static_cast<float>(kMxfp4Levels[b[i].qs[j] >> 4]) * d;
    }
  }
}

static inline void decode_q2_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int half = 0; half < 2; ++half, q += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int part = 0; part < 2; ++part, ++is, dst += 16) {
          const float dl = d * static_cast<float>(b[i].scales[is] & 0xF);
          const float ml = dmin * static_cast<float>(b[i].scales[is] >> 4);
          for (int l = 0; l < 16; ++l) dst[l] = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
        }
  }
}

static inline void decode_q3_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(b[i].d);
    int8_t scales[16];
    q3_k_scales(b[i].scales, scales);
    const uint8_t* q = b[i].qs;
    int is = 0;
    uint8_t bit = 1;
    for (int half = 0; half < 2; ++half, q += 32)
      for (int shift = 0; shift < 8; shift += 2, bit = static_cast<uint8_t>(bit << 1))
        for (int part = 0; part < 2; ++part, ++is, dst += 16) {
          const float dl = d * static_cast<float>(scales[is]);
          for (int l = 0; l < 16; ++l) {
            const int k = l + 16 * part;
            const int v = ((q[k] >> shift) & 3) - ((b[i].hmask[k] & bit) ? 0 : 4);
            dst[l] = dl * static_cast<float>(v);
          }
        }
  }
}

// Q4_K/Q5_K: the factor and the minimum of sub-block j, as the reference decoder forms them.
static inline void k_factors(int j, const uint8_t* scales, float d, float dmin, float* dj, float* mj) {
  uint8_t sc, m;
  k_scale_min(j, scales, &sc, &m);
  *dj = d * static_cast<float>(sc);
  *mj = dmin * static_cast<float>(m);
}

static inline void decode_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32, dst += 64) {
      float d1, m1, d2, m2;
      k_factors(j, b[i].scales, d, dmin, &d1, &m1);
      k_factors(j + 1, b[i].scales, d, dmin, &d2, &m2);
      for (int l = 0; l < 32; ++l) dst[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) dst[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

static inline void decode_q5_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    const uint8_t* q = b[i].qs;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, q += 32, dst += 64) {
      float d1, m1, d2, m2;
      k_factors(j, b[i].scales, d, dmin, &d1, &m1);
      k_factors(j + 1, b[i].scales, d, dmin, &d2, &m2);
      for (int l = 0; l < 32; ++l)
        dst[l] = d1 * static_cast<float>((q[l] & 0xF) + ((b[i].qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        dst[l + 32] = d2 * static_cast<float>((q[l] >> 4) + ((b[i].qh[l] & u2) ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

static inline void decode_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = half_to_float(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128)
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        dst[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        dst[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        dst[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        dst[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
  }
}

}  // namespace kvserve::quant
