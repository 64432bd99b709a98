// The held-as-stored weight matrix (QuantMatrix: the quantized small-batch kernel and the
// decode-panel GEMM) against the definition: the rows decoded by the tensor-type table's scalar
// decoder, multiplied in double. Every stored type, stacked parts of mixed types, every batch
// height class, with and without accumulation, on every kernel level this CPU runs.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "codecs/tensor_types.h"
#include "codecs/convert.h"
#include "kernels/int8/int8_matmul.h"
#include "weights/quant_matrix.h"

namespace kvserve {
namespace {

// Byte offsets of the F16 factors inside one block of each type (codecs/quant_blocks.h).
std::vector<int> factor_offsets(TensorType t) {
  switch (t) {
    case TensorType::kQ4_0: case TensorType::kQ5_0: case TensorType::kQ8_0: case TensorType::kIQ4_NL: return {0};
    case TensorType::kQ4_1: case TensorType::kQ5_1: case TensorType::kQ4_K: case TensorType::kQ5_K: return {0, 2};
    case TensorType::kQ2_K: return {80, 82};
    case TensorType::kQ3_K: return {108};
    case TensorType::kQ6_K: return {208};
    default: return {};
  }
}

// rows x n values of type t: random payload bits with finite factors (plain types: values in [-1, 1)).
std::vector<uint8_t> random_rows(TensorType t, int64_t rows, int64_t n, std::mt19937& rng) {
  const TensorTypeTraits& tr = tensor_type(t);
  std::vector<uint8_t> out(static_cast<size_t>(rows * tensor_bytes(t, n)));
  std::uniform_real_distribution<float> U(-1.0f, 1.0f), S(0.002f, 0.02f);
  if (tr.block_size == 1) {
    std::vector<float> v(static_cast<size_t>(rows * n));
    for (float& x : v) x = U(rng);
    tr.from_float(v.data(), out.data(), rows * n);
    return out;
  }
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  for (size_t blk = 0; blk < out.size() / static_cast<size_t>(tr.bytes_per_block); ++blk) {
    for (int off : factor_offsets(t)) {
      const uint16_t h = fp32_to_fp16(S(rng));
      std::memcpy(out.data() + blk * tr.bytes_per_block + off, &h, 2);
    }
    // MXFP4's E8M0 exponent byte: scales 2^-11 .. 2^-2 (the levels run to ±6 times it).
    if (t == TensorType::kMXFP4) out[blk * tr.bytes_per_block] = static_cast<uint8_t>(117 + rng() % 10);
  }
  return out;
}

struct Case {
  std::vector<TensorType> parts;  // stacked in order, 45 rows each
  int64_t n_in;
};

class HeldMatrix : public ::testing::TestWithParam<std::tuple<Case, KernelLevel>> {};

// x rounded as the integer path rounds it for type t (round_activations per activation_block).
std::vector<float> rounded(const std::vector<float>& x, int64_t rows, int64_t n_in, TensorType t) {
  const int n = activation_block(static_cast<uint32_t>(t));
  std::vector<float> out(x.size());
  std::vector<int8_t> q(n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < n_in / n; ++b) {
      const float d = round_activations(x.data() + r * n_in + n * b, q.data(), n);
      for (int i = 0; i < n; ++i) out[r * n_in + n * b + i] = d * q[i];
    }
  return out;
}

void check(const Case& c, KernelLevel level, bool int8, bool packed = false, int64_t unpacked_rows = 45);

TEST_P(HeldMatrix, MatchesTheDecodedDefinitionAtEveryBatchHeight) {
  check(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

// With int8_activations, where the level takes the integer path: the definition on the rounded
// activations (the rounding is the only difference); elsewhere the exact one. 45 rows end on a
// short panel alone, 61 on a pair of panels whose second is short (the AVX-512 GEMMs take
// panels two at a time).
TEST_P(HeldMatrix, IntegerPathMatchesTheDefinitionOnRoundedActivations) {
  for (int64_t rows : {45, 61}) {
    SCOPED_TRACE(rows);
    check(std::get<0>(GetParam()), std::get<1>(GetParam()), true, false, rows);
  }
}

// Parts of 80 rows packed into panels where the level allows (kernels/int8/int8_matmul.h), as
// the loader holds them: the same definition on the rounded activations.
TEST_P(HeldMatrix, PackedPanelsMatchTheDefinitionOnRoundedActivations) {
  check(std::get<0>(GetParam()), std::get<1>(GetParam()), true, true);
}

// The same on one thread, as a mixture's experts run (each expert's products on a thread of its
// own: every pair of panels in one thread's run).
TEST_P(HeldMatrix, PackedPanelsOnOneThreadMatchTheDefinition) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  check(std::get<0>(GetParam()), std::get<1>(GetParam()), true, true);
  omp_set_num_threads(threads);
}

void check(const Case& c, KernelLevel level, bool int8, bool packed, int64_t unpacked_rows) {
  ComputeContext ctx(kernel_table(level));
  std::mt19937 rng(5);
  // Unpacked: not a multiple of any kernel's row group; packed: five panels (two pairs, whose
  // bytes are interleaved, and one alone).
  const int64_t rows_per_part = packed ? 80 : unpacked_rows, n_in = c.n_in;
  int packed_parts = 0;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<HeldRows> parts;
  std::vector<float> w;  // the definition: every row decoded, [n_out, n_in]
  for (TensorType t : c.parts) {
    storage.push_back(random_rows(t, rows_per_part, n_in, rng));
    const int64_t row_bytes = tensor_bytes(t, n_in);
    parts.push_back({t, storage.back().data(), rows_per_part, row_bytes});
    w.resize(w.size() + rows_per_part * n_in);
    tensor_type(t).to_float(storage.back().data(), w.data() + w.size() - rows_per_part * n_in, rows_per_part * n_in);
    if (packed && plan_packs(*ctx.kernels, static_cast<uint32_t>(t), n_in, rows_per_part, int8)) {
      ctx.kernels->pack_panels(static_cast<uint32_t>(t), storage.back().data(), rows_per_part, row_bytes, n_in);
      parts.back().panels = true;
      ++packed_parts;
      // A packed row is not at r * row_bytes: decoding one is refused, not read wrongly.
      std::vector<float> row(n_in);
      EXPECT_THROW(parts.back().decode_row(1, row.data(), n_in), std::logic_error);
    }
  }
  if (packed && packed_parts == 0) GTEST_SKIP() << "no part of this case is held as panels at this level";
  QuantMatrix m(ctx, parts, n_in, int8);
  // Whether the plan takes each part's product at `rows` rows on the integer path (every height
  // on AVX-512; on the AVX2 levels decode heights, and prompts of the K types).
  auto parts_int8 = [&](int64_t rows) {
    std::vector<bool> out;
    for (size_t p = 0; p < c.parts.size(); ++p)
      out.push_back(is_int8_path(plan_matmul(*ctx.kernels, static_cast<uint32_t>(c.parts[p]),
                                             {.n_in = n_in, .m = rows, .panels = parts[p].panels, .int8_activations = int8})));
    return out;
  };
  const int64_t n_out = m.n_out();
  ASSERT_EQ(n_out, rows_per_part * static_cast<int64_t>(c.parts.size()));
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  for (int64_t rows : std::vector<int64_t>{1, 2, 3, 4, 5, 7, 9, 13, 16, 17, 30, kSmallBatchRows, kSmallBatchRows + 1, 150}) {
    const int64_t rp = WeightMatrix::padded_rows(rows);
    std::vector<float> x(rp * n_in), base(rp * n_out);
    for (float& v : x) v = U(rng);
    for (float& v : base) v = U(rng);
    const std::vector<bool> part_int8 = parts_int8(rows);
    for (bool accumulate : {false, true}) {
      std::vector<float> y = base;
      m.forward(x.data(), rows, y.data(), accumulate);
      std::vector<std::vector<float>> xq;  // per part
      for (TensorType t : c.parts) xq.push_back(rounded(x, rows, n_in, t));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < n_out; ++o) {
          const int64_t part = o / rows_per_part;
          const std::vector<float>& xr = part_int8[static_cast<size_t>(part)] ? xq[part] : x;
          double ref = accumulate ? base[r * n_out + o] : 0.0, mag = 0.0;
          for (int64_t i = 0; i < n_in; ++i) {
            ref += double(xr[r * n_in + i]) * w[o * n_in + i];
            mag += std::fabs(double(xr[r * n_in + i]) * w[o * n_in + i]);
          }
          ASSERT_NEAR(y[r * n_out + o], ref, 4e-6 * mag + 1e-6)
              << "rows=" << rows << " row " << r << " out " << o << " accumulate " << accumulate;
        }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, KernelLevel>>& info) {
  std::string s;
  for (TensorType t : std::get<0>(info.param).parts) s += std::string(tensor_type_name(t)) + "_";
  return s + std::to_string(std::get<0>(info.param).n_in) + "_" + level_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Types, HeldMatrix,
    ::testing::Combine(::testing::Values(Case{{TensorType::kF16}, 200}, Case{{TensorType::kF16}, 37}, Case{{TensorType::kBF16}, 72},
                                         Case{{TensorType::kQ4_0}, 576}, Case{{TensorType::kQ4_1}, 96},
                                         Case{{TensorType::kIQ4_NL}, 896}, Case{{TensorType::kQ5_0}, 896},
                                         Case{{TensorType::kMXFP4}, 2880}, Case{{TensorType::kMXFP4}, 96},
                                         Case{{TensorType::kMXFP4, TensorType::kQ8_0}, 640},
                                         Case{{TensorType::kQ4_1}, 640}, Case{{TensorType::kQ5_1}, 896},
                                         Case{{TensorType::kQ5_0}, 160}, Case{{TensorType::kQ5_1}, 64},
                                         Case{{TensorType::kQ8_0}, 1056}, Case{{TensorType::kQ8_0}, 1024},
                                         Case{{TensorType::kQ4_0, TensorType::kQ4_1}, 128}, Case{{TensorType::kQ2_K}, 512},
                                         Case{{TensorType::kQ3_K}, 256}, Case{{TensorType::kQ4_K}, 768},
                                         // Wide enough that packed Q4_K reads its panels direct at every height.
                                         Case{{TensorType::kQ4_K}, 2048},
                                         Case{{TensorType::kQ5_K}, 256}, Case{{TensorType::kQ6_K}, 512},
                                         // Q4_K_M's fused Q/K/V: Q4_K rows over Q6_K rows, and an F32 part.
                                         Case{{TensorType::kQ4_K, TensorType::kQ4_K, TensorType::kQ6_K}, 256},
                                         Case{{TensorType::kQ8_0, TensorType::kF32, TensorType::kF16}, 96}),
                       ::testing::ValuesIn(supported_levels())),
    case_name);

class Mxfp4Scales : public ::testing::TestWithParam<KernelLevel> {};

// MXFP4's E8M0 scales over their range (subnormal 2^-128 and 2^-127, 2^-126, around 1, 2^72),
// one exponent per row, at a fused height and a GEMM height: each output within a relative
// 4e-6 of the definition on the rounded activations (no absolute floor, which would hide the
// smallest scales).
TEST_P(Mxfp4Scales, EveryExponentMatchesTheDefinition) {
  ComputeContext ctx(kernel_table(GetParam()));
  const std::vector<uint8_t> exponents = {0, 1, 2, 3, 100, 127, 128, 129, 150, 200, 5, 77, 126, 254 - 60, 31, 64};
  const int64_t n_in = 256, rows = static_cast<int64_t>(exponents.size());
  const TensorType t = TensorType::kMXFP4;
  const int64_t row_bytes = tensor_bytes(t, n_in);
  std::mt19937 rng(11);
  std::vector<uint8_t> w(static_cast<size_t>(rows * row_bytes));
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t blk = 0; blk < n_in / 32; ++blk) w[r * row_bytes + blk * 17] = exponents[static_cast<size_t>(r)];
  std::vector<float> wf(static_cast<size_t>(rows * n_in));
  tensor_type(t).to_float(w.data(), wf.data(), rows * n_in);
  QuantMatrix m(ctx, {HeldRows{t, w.data(), rows, row_bytes}}, n_in, true);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  for (int64_t height : {int64_t{1}, int64_t{3}, int64_t{8}}) {
    const bool int8 = is_int8_path(plan_matmul(*ctx.kernels, static_cast<uint32_t>(t), {.n_in = n_in, .m = height}));
    std::vector<float> x(static_cast<size_t>(WeightMatrix::padded_rows(height) * n_in)), y(static_cast<size_t>(WeightMatrix::padded_rows(height) * rows));
    for (float& v : x) v = U(rng);
    m.forward(x.data(), height, y.data(), false);
    const std::vector<float> xr = int8 ? rounded(x, height, n_in, t) : x;
    for (int64_t h = 0; h < height; ++h)
      for (int64_t o = 0; o < rows; ++o) {
        double ref = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n_in; ++i) {
          ref += double(xr[h * n_in + i]) * wf[o * n_in + i];
          mag += std::fabs(double(xr[h * n_in + i]) * wf[o * n_in + i]);
        }
        ASSERT_NEAR(y[h * rows + o], ref, 4e-6 * mag) << "height " << height << " exponent " << int(exponents[o]);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, Mxfp4Scales, ::testing::ValuesIn(supported_levels()),
                         [](const auto& info) { return std::string(level_name(info.param)); });

// On the AVX2 levels the batch kernels (five rows and more) take each output's operations in
// the fused kernel's order: a row's product is the same bits whatever else is in the batch, as
// one row alone gets (the AVX-512 panel GEMMs sum in another order and make no such promise).
class BatchLikeOneRow : public ::testing::TestWithParam<std::tuple<TensorType, KernelLevel>> {};

TEST_P(BatchLikeOneRow, EachRowOfABatchIsItsProductAlone) {
  const auto [t, level] = GetParam();
  if (level != KernelLevel::kAvx2 && level != KernelLevel::kAvx2Vnni) GTEST_SKIP() << "the AVX2 levels' promise";
  ComputeContext ctx(kernel_table(level));
  std::mt19937 rng(13);
  const int64_t rows = 45, n_in = 512, height = 21;
  std::vector<uint8_t> w = random_rows(t, rows, n_in, rng);
  QuantMatrix m(ctx, {HeldRows{t, w.data(), rows, tensor_bytes(t, n_in)}}, n_in, true);
  ASSERT_EQ(plan_matmul(*ctx.kernels, static_cast<uint32_t>(t), {.n_in = n_in, .m = height}),
            tensor_type(t).block_size == 256 ? MatmulPath::kKGemm : MatmulPath::kQ32Gemm);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(WeightMatrix::padded_rows(height) * n_in));
  for (float& v : x) v = U(rng);
  std::vector<float> batch(static_cast<size_t>(WeightMatrix::padded_rows(height) * rows));
  m.forward(x.data(), height, batch.data(), false);
  for (int64_t r = 0; r < height; ++r) {
    std::vector<float> one(static_cast<size_t>(WeightMatrix::padded_rows(1) * rows));
    m.forward(x.data() + r * n_in, 1, one.data(), false);
    for (int64_t o = 0; o < rows; ++o)
      ASSERT_EQ(std::bit_cast<uint32_t>(batch[r * rows + o]), std::bit_cast<uint32_t>(one[o]))
          << "row " << r << " out " << o << ": " << batch[r * rows + o] << " in the batch, " << one[o] << " alone";
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BatchLikeOneRow,
                         ::testing::Combine(::testing::Values(TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K,
                                                              TensorType::kQ3_K, TensorType::kQ2_K, TensorType::kQ8_0,
                                                              TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0,
                                                              TensorType::kQ5_1, TensorType::kIQ4_NL, TensorType::kMXFP4),
                                            ::testing::ValuesIn(supported_levels())),
                         [](const auto& info) {
                           return std::string(tensor_type_name(std::get<0>(info.param))) + "_" +
                                  level_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace kvserve
