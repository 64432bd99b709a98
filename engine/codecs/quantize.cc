#include "codecs/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "codecs/quant_blocks.h"
#include "codecs/convert.h"

namespace kvserve::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (the rounding ggml's integer trick gives).
int nearest_int(float x) { return static_cast<int>(std::nearbyint(x)); }
float f16_round_trip(uint16_t h) { return fp16_to_fp32(h); }

// The value of largest magnitude among x[0..n), with its sign (the first such).
float signed_absmax(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

// --- Searches for the scale of a block ------------------------------------------------------

// Signed levels -nmax..nmax-1 with one scale: start from the scale that maps the value of largest
// magnitude to -nmax, then try 18 nearby scales and keep the one of least weighted squared error
// (weights x², as ggml's rmse_type 1). levels: [n] in 0..2·nmax-1. Returns the scale.
float fit_signed(int n, int nmax, const float* x, int8_t* levels) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(levels, levels + n, 0);
    return 0.0f;
  }
  const auto trial = [&](float iscale, float& sumlx, float& suml2, bool store) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      if (store) levels[i] = static_cast<int8_t>(l + nmax);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l * l);
    }
  };
  float sumlx, suml2;
  trial(-static_cast<float>(nmax) / max, sumlx, suml2, true);
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    trial(iscale, sumlx, suml2, false);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      trial(iscale, sumlx, suml2, true);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's sub-block search: signed levels -nmax..nmax-1, then up to five passes moving single
// levels while that lowers the x²-weighted error. levels: [n] in 0..2·nmax-1.
float fit_signed_refined(int n, int nmax, const float* x, int8_t* levels) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(levels, levels + n, 0);
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l * l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(levels[i]);
      if (slx <= 0) continue;
      float sl2 = suml2 - w * static_cast<float>(levels[i] * levels[i]);
      const int l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == levels[i]) continue;
      slx += w * x[i] * static_cast<float>(l);
      sl2 += w * static_cast<float>(l * l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        levels[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Levels 0..nmax with a scale and a minimum (value ≈ scale·l - min, min >= 0): from the block's
// range, then nstep+1 scales around it, each with the least-squares scale and minimum for its
// levels; the weighted error (absolute when mad) decides. levels: [n]. Returns the scale.
float fit_with_min(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float* the_min,
                   float rmin, float rdelta, int nstep, bool mad) {
  float min = x[0], max = x[0], sum_w = weights[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(levels, levels + n, 0);
    *the_min = -min;
    return 0.0f;
  }
  const auto error = [&](const uint8_t* l, float scale, float mn) {
    float e = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * static_cast<float>(l[i]) + mn - x[i];
      e += weights[i] * (mad ? std::fabs(diff) : diff * diff);
    }
    return e;
  };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
  float best = error(levels, scale, min);
  uint8_t aux[256];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += weights[i] * static_cast<float>(l);
      sum_l2 += weights[i] * static_cast<float>(l * l);
      sum_xl += weights[i] * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float e = error(aux, this_scale, this_min);
    if (e < best) {
      std::copy(aux, aux + n, levels);
      best = e;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}


void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = FLT_MAX;
  *mx = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    *mn = std::min(*mn, x[j]);
    *mx = std::max(*mx, x[j]);
  }
}

// Packs 8 six-bit scales and mins as Q4_K/Q5_K store them (inverse of k_scale_min).
void pack_k_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* out) {
  std::memset(out, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out[j] = ls[j];
      out[j + 4] = lm[j];
    } else {
      out[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      out[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      out[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Q4_K and Q5_K: eight sub-blocks of 32 with a scale and a min each (levels 0..nmax).
template <int kNmax>
void fit_k_superblock(const float* x, uint8_t* levels, uint8_t* scales12, uint16_t* d, uint16_t* dmin, float rmin,
                      int nstep) {
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = fit_with_min(32, kNmax, x + 32 * j, weights, levels + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f, inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[j])));
  }
  pack_k_scales(ls, lm, scales12);
  *d = fp32_to_fp16(max_scale / 63.f);
  *dmin = fp32_to_fp16(max_min / 63.f);
  // Levels again against the scales as stored.
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    k_scale_min(j, scales12, &sc, &m);
    const float dd = f16_round_trip(*d) * static_cast<float>(sc);
    if (!dd) continue;
    const float dm = f16_round_trip(*dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      levels[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / dd), 0, kNmax));
  }
}

// Q3_K and Q6_K: 16 sub-blocks of 16 fitted with signed levels; the scale of largest magnitude,
// with its sign, is returned (the super-block factor is taken from it).
float fit_signed_sub_blocks(const float* x, int nmax, bool refined, int8_t* levels, float* scales) {
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = refined ? fit_signed_refined(16, nmax, x + 16 * j, levels + 16 * j)
                        : fit_signed(16, nmax, x + 16 * j, levels + 16 * j);
    if (std::fabs(scales[j]) > amax) {
      amax = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  return max_scale;
}

// Q2_K and Q3_K: 2-bit levels, four per byte, as their decoders read them. levels: [256].
template <class Level>
void pack_2bit(const Level* levels, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 2) | (levels[j + l + 64] << 4) |
                                           (levels[j + l + 96] << 6));
}

}  // namespace

void encode_q4_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8, id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const auto q0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
      const auto q1 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f))));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void encode_q4_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 15, id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const auto q0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - mn) * id + 0.5f))));
      const auto q1 =
          static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - mn) * id + 0.5f))));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

namespace {
// Q5_0/Q5_1: low nibbles into qs, fifth bits into the 32-bit qh.
template <class Block>
void pack5(Block& b, const uint8_t* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    b.qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q[j + 16] & 0x10) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
}
}  // namespace

void encode_q5_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16, id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j)
      q[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))));
    pack5(y[i], q);
  }
}

void encode_q5_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 31, id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(mn);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = static_cast<uint8_t>((x[j] - mn) * id + 0.5f);
    pack5(y[i], q);
  }
}

void encode_q8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

namespace {
// The index of the IQ4_NL level nearest v (the upper one on a tie).
int nearest_iq4nl(float v) {
  const int8_t* lv = kIq4nlLevels;
  if (v <= lv[0]) return 0;
  if (v >= lv[15]) return 15;
  int lo = 0, hi = 15;  // lv[lo] < v <= lv[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (v < lv[mid] ? hi : lo) = mid;
  }
  return v - lv[lo] < lv[hi] - v ? lo : hi;
}

// For levels at inverse scale inv (index = nearest level to inv·x): the x²-weighted sums
// Σ w·q·x and Σ w·q² of the picked levels q.
void iq4nl_sums(const float* x, float inv, float* sum_qx, float* sum_q2) {
  float qx = 0, q2 = 0;
  for (int j = 0; j < kQK; ++j) {
    const float q = kIq4nlLevels[nearest_iq4nl(inv * x[j])], w = x[j] * x[j];
    qx += w * q * x[j];
    q2 += w * q * q;
  }
  *sum_qx = qx, *sum_q2 = q2;
}
}  // namespace

void encode_iq4_nl(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockIQ4_NL*>(dst);
  constexpr int kTries = 7;  // inverse scales (kTries·2 + 1 of them) tried around the largest value's
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float big = signed_absmax(x, kQK);
    float d = 0;
    if (std::fabs(big) >= 1e-15f) {
      // Start with the largest value on the outermost level; the least-squares scale of those
      // levels, then of each nearby inverse scale's levels, keeping the one of least error
      // (largest sum_qx² / sum_q2).
      float qx, q2;
      iq4nl_sums(x, -kIq4nlLevels[0] / big, &qx, &q2);
      d = q2 > 0 ? qx / q2 : 0.0f;
      float best = d * qx;
      for (int t = -kTries; t <= kTries; ++t) {
        iq4nl_sums(x, static_cast<float>(t + kIq4nlLevels[0]) / big, &qx, &q2);
        if (q2 > 0 && qx * qx > best * q2) d = qx / q2, best = d * qx;
      }
    }
    y[i].d = fp32_to_fp16(d);
    const float inv = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQK / 2; ++j)
      y[i].qs[j] = static_cast<uint8_t>(nearest_iq4nl(inv * x[j]) | (nearest_iq4nl(inv * x[j + 16]) << 4));
  }
}

void encode_mxfp4(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const auto e = static_cast<uint8_t>(amax > 0.0f ? std::floor(std::log2(amax)) - 2 + 127 : 0);
    const float d = e8m0_half(e);
    const auto nearest = [d](float v) {
      int best = 0;
      float err = std::fabs(kMxfp4Levels[0] * d - v);
      for (int k = 1; k < 16; ++k)
        if (const float e2 = std::fabs(kMxfp4Levels[k] * d - v); e2 < err) best = k, err = e2;
      return best;
    };
    y[i].e = e;
    for (int j = 0; j < kQK / 2; ++j) y[i].qs[j] = static_cast<uint8_t>(nearest(x[j]) | (nearest(x[j + 16]) << 4));
  }
}

void encode_q2_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    uint8_t levels[kQK_K];
    float weights[16], scales[16], mins[16], max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_with_min(16, 3, x + 16 * j, weights, levels + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& b = y[i];
    std::memset(b.scales, 0, sizeof(b.scales));
    b.d = fp32_to_fp16(max_scale > 0 ? max_scale / 15.f : 0.f);
    b.dmin = fp32_to_fp16(max_min > 0 ? max_min / 15.f : 0.f);
    if (max_scale > 0)
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(15.f / max_scale * scales[j]));
    if (max_min > 0)
      for (int j = 0; j < 16; ++j) b.scales[j] |= static_cast<uint8_t>(nearest_int(15.f / max_min * mins[j]) << 4);
    for (int j = 0; j < 16; ++j) {
      const float d = f16_round_trip(b.d) * static_cast<float>(b.scales[j] & 0xF);
      if (!d) continue;
      const float dm = f16_round_trip(b.dmin) * static_cast<float>(b.scales[j] >> 4);
      for (int l = 0; l < 16; ++l)
        levels[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + l] + dm) / d), 0, 3));
    }
    pack_2bit(levels, b.qs);
  }
}

void encode_q3_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    int8_t levels[kQK_K];
    float scales[16];
    const float max_scale = fit_signed_sub_blocks(x, 4, /*refined=*/true, levels, scales);
    BlockQ3_K& b = y[i];
    std::memset(b.scales, 0, sizeof(b.scales));
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = std::clamp(nearest_int(iscale * scales[j]), -32, 31) + 32;
        if (j < 8)
          b.scales[j] = static_cast<uint8_t>(l & 0xF);
        else
          b.scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        b.scales[j % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
      }
      b.d = fp32_to_fp16(1 / iscale);
    } else {
      b.d = fp32_to_fp16(0.f);
    }
    int8_t stored[16];
    q3_k_scales(b.scales, stored);
    for (int j = 0; j < 16; ++j) {
      const float d = f16_round_trip(b.d) * static_cast<float>(stored[j]);
      if (!d) continue;
      for (int l = 0; l < 16; ++l)
        levels[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
    }
    // Third bits: value j's in bit j / 32 of hmask[j % 32].
    std::memset(b.hmask, 0, sizeof(b.hmask));
    for (int j = 0; j < kQK_K; ++j)
      if (levels[j] > 3) {
        b.hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
        levels[j] = static_cast<int8_t>(levels[j] - 4);
      }
    pack_2bit(levels, b.qs);
  }
}

void encode_q4_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    uint8_t levels[kQK_K];
    fit_k_superblock<15>(x, levels, y[i].scales, &y[i].d, &y[i].dmin, -1.f, 20);
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        y[i].qs[32 * j + l] = static_cast<uint8_t>(levels[64 * j + l] | (levels[64 * j + l + 32] << 4));
  }
}

void encode_q5_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    uint8_t levels[kQK_K];
    fit_k_superblock<31>(x, levels, y[i].scales, &y[i].d, &y[i].dmin, -0.5f, 15);
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        int l1 = levels[64 * j + l], l2 = levels[64 * j + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[i].qh[l] |= static_cast<uint8_t>(1 << (2 * j));
        }
        if (l2 > 15) {
          l2 -= 16;
          y[i].qh[l] |= static_cast<uint8_t>(2 << (2 * j));
        }
        y[i].qs[32 * j + l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
  }
}

void encode_q6_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    int8_t levels[kQK_K];
    float scales[16];
    const float max_scale = fit_signed_sub_blocks(x, 32, /*refined=*/false, levels, scales);
    BlockQ6_K& b = y[i];
    std::memset(&b, 0, sizeof(b));
    if (std::fabs(max_scale) < kGroupMaxEps) continue;
    const float iscale = -128.f / max_scale;
    b.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < 16; ++j) {
      const float d = f16_round_trip(b.d) * static_cast<float>(b.scales[j]);
      if (!d) continue;
      for (int l = 0; l < 16; ++l)
        levels[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
    }
    uint8_t* ql = b.ql;
    uint8_t* qh = b.qh;
    for (int j = 0; j < kQK_K; j += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const int q1 = levels[j + l], q2 = levels[j + l + 32], q3 = levels[j + l + 64], q4 = levels[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
  }
}

}  // namespace kvserve::quant
