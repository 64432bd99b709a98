// The block layouts of ggml's quantized tensor types, as ggml-common.h defines them: Q4_0..Q8_0
// hold 32 values a block with one (or two) F16 factors; the K types hold 256 values a
// super-block with packed sub-block scales. Values are little-endian, blocks packed.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace kvserve::quant {

constexpr int kQK = 32;    // values per block of the 32-value types
constexpr int kQK_K = 256; // values per super-block of the K types
constexpr int kKScaleBytes = 12;  // Q4_K/Q5_K: 8 six-bit scales and 8 six-bit mins

struct BlockQ4_0 {
  uint16_t d;             // F16 scale
  uint8_t qs[kQK / 2];    // value j in the low nibble of byte j, value j+16 in its high nibble; q - 8
};
struct BlockQ4_1 {
  uint16_t d, m;          // F16 scale and minimum: value = q·d + m
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];          // fifth bits: bit j of the little-endian word is value j's
  uint8_t qs[kQK / 2];    // low four bits, as Q4_0; q - 16
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
// IQ4_NL: Q4_0's layout, but each 4-bit index picks one of 16 non-uniform levels (kIq4nlLevels).
struct BlockIQ4_NL {
  uint16_t d;             // F16 scale: value = d·kIq4nlLevels[index]
  uint8_t qs[kQK / 2];    // index j in the low nibble of byte j, index j+16 in its high nibble
};
// The levels of IQ4_NL, denser near zero (ggml-common.h's kvalues_iq4nl).
inline constexpr int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// MXFP4 (OCP microscaling, gpt-oss's experts): 32 E2M1 values sharing one E8M0 power-of-two
// scale. kMxfp4Levels holds each 4-bit code's value doubled (as ggml's kvalues_mxfp4), and the
// scale byte e decodes to 2^(e - 128), the half that undoes it.
struct BlockMXFP4 {
  uint8_t e;            // E8M0 exponent
  uint8_t qs[kQK / 2];  // code j in the low nibble of byte j, code j+16 in its high nibble
};
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128) as ggml's E8M0_TO_FP32_HALF: subnormal for e < 2.
constexpr float e8m0_half_of(uint32_t e) {
  return std::bit_cast<float>(e < 2 ? 0x00200000u << e : (e - 1) << 23);
}
// Every exponent's value: the integer kernels look a block's scale up (one load) where the
// arithmetic above took a dozen scalar instructions for every block.
inline constexpr std::array<float, 256> kE8m0Halves = [] {
  std::array<float, 256> t{};
  for (uint32_t e = 0; e < 256; ++e) t[e] = e8m0_half_of(e);
  return t;
}();
inline float e8m0_half(uint8_t e) { return kE8m0Halves[e]; }
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // per 16 values: 4-bit scale (low), 4-bit min (high)
  uint8_t qs[kQK_K / 4];       // 2-bit values
  uint16_t d, dmin;            // super-block factors of the scales and of the mins
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];    // third bits (set: no offset; clear: minus 4)
  uint8_t qs[kQK_K / 4];       // low two bits
  uint8_t scales[12];          // 16 six-bit scales, offset by 32
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low four bits
  uint8_t qh[kQK_K / 4];       // high two bits
  int8_t scales[kQK_K / 16];   // per 16 values
  uint16_t d;
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIQ4_NL) == 18 &&
              sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Static: kernel levels compile their own copies (kernels/kernel_level.h).
// Q4_K/Q5_K: the six-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
static inline void k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: its 16 scales (-32..31) unpacked from the 12 bytes.
static inline void q3_k_scales(const uint8_t* packed, int8_t* out) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace kvserve::quant
