// The kernel plan (kernels/matmul_plan.h) as scenarios on made-up rows and CPUs, and each
// level's table of rows against the tensor-type table: every decoder a level gives a type
// decodes as the scalar reference decoder does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "codecs/tensor_types.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul_plan.h"

namespace kvserve {
namespace {

// Rows as the AVX-512 level has them: every integer kernel, VNNI needed.
MatmulTypeRow k_row(bool gfni = false) {
  return {.type = TensorType::kQ4_K, .family = MatmulFamily::kBlockK, .int8 = true, .int8_gemm = true,
          .int8_prompts = true, .int8_needs_avx512_vnni = true, .packs = true, .packs_need_gfni = gfni};
}
MatmulTypeRow q32_row() {
  return {.type = TensorType::kQ8_0, .family = MatmulFamily::kBlock32, .int8 = true, .int8_gemm = true,
          .int8_prompts = true, .int8_needs_avx512_vnni = true, .packs = true};
}
// As the AVX2 levels have them, on any CPU that runs the level: the fused and batch kernels, the
// 32-value types' prompts on the float path, the K types' on the integer one.
MatmulTypeRow q32_avx2_row() {
  return {.type = TensorType::kQ4_0, .family = MatmulFamily::kBlock32, .int8 = true, .int8_gemm = true};
}
MatmulTypeRow k_avx2_row() {
  return {.type = TensorType::kQ4_K, .family = MatmulFamily::kBlockK, .int8 = true, .int8_gemm = true, .int8_prompts = true,
          .int8_lanes = true};
}
// A level with the fused kernel only.
MatmulTypeRow q32_fused_only_row() {
  return {.type = TensorType::kQ4_0, .family = MatmulFamily::kBlock32, .int8 = true};
}
MatmulTypeRow f16_row(bool avx512) {
  return {.type = TensorType::kF16, .family = MatmulFamily::kFloat, .packs = avx512, .f16_rows = avx512};
}
constexpr MatmulCpu kVnni{.avx512_vnni = true, .gfni = true};
constexpr MatmulCpu kNoVnni{.avx512_vnni = false, .gfni = true};

MatmulPath at(const MatmulTypeRow& row, const MatmulCpu& cpu, int64_t m, bool panels = false, int64_t n_in = 4096,
              bool int8 = true) {
  return plan_matmul(row, cpu, {.n_in = n_in, .m = m, .panels = panels, .int8_activations = int8});
}

TEST(MatmulPlan, IntegerKernelsByHeightAndLayout) {
  EXPECT_EQ(at(k_row(), kVnni, 1), MatmulPath::kKFused);
  EXPECT_EQ(at(k_row(), kVnni, kFusedMaxRows), MatmulPath::kKFused);
  EXPECT_EQ(at(k_row(), kVnni, kFusedMaxRows + 1), MatmulPath::kKGemm);
  EXPECT_EQ(at(k_row(), kVnni, 512), MatmulPath::kKGemm);  // the integer path serves prompts too
  EXPECT_EQ(at(k_row(), kVnni, 1, true), MatmulPath::kKPacked);
  EXPECT_EQ(at(k_row(), kVnni, 512, true), MatmulPath::kKPacked);
  EXPECT_EQ(at(q32_row(), kVnni, 3), MatmulPath::kQ32Fused);
  EXPECT_EQ(at(q32_row(), kVnni, 16), MatmulPath::kQ32Gemm);
  EXPECT_EQ(at(q32_row(), kVnni, 16, true), MatmulPath::kQ32Packed);
  // The AVX2 levels: no AVX-512 VNNI needed; the batch kernel above four rows; prompts on the
  // integer path only where int8_prompts says so.
  for (int64_t m : {1, 4}) EXPECT_EQ(at(q32_avx2_row(), kNoVnni, m), MatmulPath::kQ32Fused);
  for (int64_t m : {5, 64}) EXPECT_EQ(at(q32_avx2_row(), kNoVnni, m), MatmulPath::kQ32Gemm);
  EXPECT_EQ(at(q32_avx2_row(), kNoVnni, 65), MatmulPath::kDecodedGemm);
  EXPECT_EQ(at(q32_avx2_row(), kNoVnni, 512), MatmulPath::kDecodedGemm);
  EXPECT_EQ(at(k_avx2_row(), kNoVnni, 4), MatmulPath::kKFused);
  for (int64_t m : {5, 64}) EXPECT_EQ(at(k_avx2_row(), kNoVnni, m), MatmulPath::kKGemm);
  for (int64_t m : {65, 512}) EXPECT_EQ(at(k_avx2_row(), kNoVnni, m), MatmulPath::kKLanes);  // the prompt kernel
  EXPECT_TRUE(is_int8_path(MatmulPath::kKLanes));
  EXPECT_STREQ(matmul_path_name(MatmulPath::kKLanes), "k_lanes");
  EXPECT_FALSE(plan_packs(q32_avx2_row(), kNoVnni, 4096, 4096, true));
  EXPECT_EQ(at(q32_avx2_row(), kNoVnni, 1, false, 4096, false), MatmulPath::kDecodeL1);
  // Without a batch kernel the fused kernel takes every decode height.
  for (int64_t m : {1, 4, 5, 64}) EXPECT_EQ(at(q32_fused_only_row(), kNoVnni, m), MatmulPath::kQ32Fused);
  // A row whose fused kernel gives way earlier (fused_rows).
  MatmulTypeRow early = q32_row();
  early.packs = false;
  early.fused_rows = 2;
  EXPECT_EQ(at(early, kVnni, 2), MatmulPath::kQ32Fused);
  for (int64_t m : {3, 4, 64}) EXPECT_EQ(at(early, kVnni, m), MatmulPath::kQ32Gemm);
  early.int8_gemm = false;
  EXPECT_EQ(at(early, kVnni, 4), MatmulPath::kQ32Fused);
  EXPECT_EQ(at(q32_fused_only_row(), kNoVnni, 65), MatmulPath::kDecodedGemm);
}

TEST(MatmulPlan, FloatPathWhereTheIntegerKernelsCannotRun) {
  // No VNNI, activations kept float, or a width the kernels do not step through.
  for (const auto& [cpu, int8, n_in] : {std::tuple{kNoVnni, true, int64_t{4096}}, std::tuple{kVnni, false, int64_t{4096}},
                                        std::tuple{kVnni, true, int64_t{4096 + 32}}}) {
    EXPECT_EQ(at(k_row(), cpu, 1, false, n_in, int8), MatmulPath::kDecodeL1);
    EXPECT_EQ(at(q32_row(), cpu, 64, false, n_in, int8), MatmulPath::kDecodeL1);
    EXPECT_EQ(at(q32_row(), cpu, 65, false, n_in, int8), MatmulPath::kDecodedGemm);
    EXPECT_FALSE(plan_packs(q32_row(), cpu, n_in, 4096, int8));
    EXPECT_THROW(at(k_row(), cpu, 1, true, n_in, int8), std::logic_error);  // such panels are never made
  }
  MatmulTypeRow scalar_level = k_row();
  scalar_level.int8 = scalar_level.packs = false;
  EXPECT_EQ(at(scalar_level, kVnni, 4), MatmulPath::kDecodeL1);
}

TEST(MatmulPlan, PacksWholePanelsOnlyAndQ6KPanelsNeedGfni) {
  EXPECT_TRUE(plan_packs(k_row(), kVnni, 4096, 4096, true));
  EXPECT_FALSE(plan_packs(k_row(), kVnni, 4096, 4096 + 8, true));  // 16 rows a panel
  EXPECT_TRUE(plan_packs(k_row(true), kVnni, 4096, 4096, true));
  EXPECT_FALSE(plan_packs(k_row(true), MatmulCpu{.avx512_vnni = true, .gfni = false}, 4096, 4096, true));
}

TEST(MatmulPlan, F16) {
  EXPECT_EQ(at(f16_row(true), kNoVnni, 4), MatmulPath::kF16Rows);
  EXPECT_EQ(at(f16_row(true), kNoVnni, 5), MatmulPath::kDecodeL1);
  EXPECT_EQ(at(f16_row(true), kNoVnni, 65), MatmulPath::kDecodedGemm);
  EXPECT_EQ(at(f16_row(true), kNoVnni, 65, true), MatmulPath::kF16Packed);
  // F16 panels are float: they need no integer path, only the level's kernels.
  EXPECT_TRUE(plan_packs(f16_row(true), kNoVnni, 4096, 64, false));
  EXPECT_FALSE(plan_packs(f16_row(false), kVnni, 4096, 64, true));
  EXPECT_EQ(at(f16_row(false), kVnni, 1), MatmulPath::kDecodeL1);
}

TEST(MatmulPlan, OnednnMatrices) {
  EXPECT_EQ(plan_onednn_matmul(true, 64), MatmulPath::kF32SmallBatch);
  EXPECT_EQ(plan_onednn_matmul(true, 65), MatmulPath::kOnednn);
  EXPECT_EQ(plan_onednn_matmul(false, 1), MatmulPath::kOnednn);
  EXPECT_EQ(plan_at_report_heights([](int64_t m) { return plan_onednn_matmul(true, m); }), "f32_small_batch x4 onednn");
}

// Every row of every level this CPU runs: its type is loadable, its family matches the block
// size, only AVX-512 levels claim packed or F16-row kernels, the AVX2 levels the block types'
// fused and batch kernels (prompts on the integer path for the K types, by k_lanes), it carries exactly the integer kernels its flags let the plan
// pick, and its decoder gives the scalar
// reference decoder's floats bit for bit on random blocks.
TEST(MatmulPlan, EachLevelsRowsDecodeAsTheReference) {
  std::mt19937 rng(7);
  int rows_seen = 0;
  for (KernelLevel level : supported_levels()) {
    const KernelTable& k = kernel_table(level);
    for (uint32_t id = 0; id < 40; ++id) {
      const MatmulTypeRow* row = k.matmul_type_row(id);
      const TensorTypeTraits* traits = find_tensor_type(id);
      if (!row) continue;
      ++rows_seen;
      SCOPED_TRACE(std::string(level_name(level)) + " " + tensor_type_label(id));
      ASSERT_TRUE(traits && traits->to_float);
      EXPECT_EQ(static_cast<uint32_t>(row->type), id);
      const MatmulFamily family = traits->block_size == 1     ? MatmulFamily::kFloat
                                  : traits->block_size == 256 ? MatmulFamily::kBlockK
                                                              : MatmulFamily::kBlock32;
      EXPECT_EQ(row->family, family);
      if (level != KernelLevel::kAvx512) {
        EXPECT_FALSE(row->packs || row->f16_rows);
        EXPECT_EQ(row->int8, level != KernelLevel::kScalar && family != MatmulFamily::kFloat);
        EXPECT_EQ(row->int8_gemm, row->int8);
        EXPECT_EQ(row->int8_prompts, row->int8 && family == MatmulFamily::kBlockK);
        EXPECT_EQ(row->int8_lanes, row->int8 && family == MatmulFamily::kBlockK);
        EXPECT_FALSE(row->int8_needs_avx512_vnni);
        EXPECT_EQ(row->fused_rows, kFusedMaxRows);
      } else {
        EXPECT_FALSE(row->int8_lanes);
        EXPECT_EQ(row->int8_needs_avx512_vnni, row->int8);
        // MXFP4's batch kernel takes over from 3 rows there (matmul_types.cc).
        EXPECT_EQ(row->fused_rows, row->type == TensorType::kMXFP4 ? 2 : kFusedMaxRows);
      }
      // What the plan may pick, the row has a kernel for, and nothing more (an integer product
      // of a float type is never planned: plan_int8).
      const bool blocks = family != MatmulFamily::kFloat;
      EXPECT_EQ(row->int8_kernels.fused != nullptr, blocks && row->int8);
      EXPECT_EQ(row->int8_kernels.gemm != nullptr, blocks && row->int8 && row->int8_gemm);
      EXPECT_EQ(row->int8_kernels.packed != nullptr, blocks && row->packs);
      EXPECT_EQ(row->int8_kernels.lanes != nullptr, blocks && row->int8 && row->int8_lanes);
      EXPECT_EQ(row->int8_kernels.pack != nullptr, blocks && row->packs);
      const int64_t n = 1024;
      std::vector<uint8_t> bytes(static_cast<size_t>(tensor_bytes(row->type, n)));
      if (traits->from_float) {  // well-formed blocks (finite scales) from random values
        std::vector<float> src(n);
        std::normal_distribution<float> N(0.0f, 1.0f);
        for (float& v : src) v = N(rng);
        traits->from_float(src.data(), bytes.data(), n);
      } else {
        for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      }
      std::vector<float> want(n), got(n);
      traits->to_float(bytes.data(), want.data(), n);
      row->decode(bytes.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        if (!(std::isnan(want[i]) && std::isnan(got[i]))) {
          ASSERT_EQ(want[i], got[i]) << "value " << i;
        }
    }
  }
  EXPECT_GE(rows_seen, 14);
}

}  // namespace
}  // namespace kvserve
