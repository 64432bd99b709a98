// The row kernels of the Llama block against double-precision definitions, over inputs that
// reach the vector paths, their scalar tails and the far ends of exp's range.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "kernels/vec_math.h"

namespace kvserve {
namespace {

#if defined(__AVX512F__)
TEST(VecMath, ExpWithinTwoUlpOverTheFloatRange) {
  // Every float in [-87, 88] at a spacing fine enough to cross each reduction interval often.
  double worst = 0;
  for (float x0 = -87.0f; x0 < 88.0f; x0 += 0.0137f * 16) {
    alignas(64) float in[16], out[16];
    for (int i = 0; i < 16; ++i) in[i] = x0 + 0.0137f * i;
    _mm512_store_ps(out, exp16(_mm512_load_ps(in)));
    for (int i = 0; i < 16; ++i) {
      const double ref = std::exp(static_cast<double>(in[i]));
      worst = std::max(worst, std::abs(out[i] - ref) / ref);
    }
  }
  EXPECT_LT(worst, 2.4e-7);  // two float ulps
  alignas(64) float big[16] = {-1000.0f, -104.0f, 89.0f, 1000.0f};
  _mm512_store_ps(big, exp16(_mm512_load_ps(big)));
  EXPECT_EQ(big[0], 0.0f);
  EXPECT_LT(big[1], 1e-44f);
  EXPECT_TRUE(std::isinf(big[2]));
  EXPECT_TRUE(std::isinf(big[3]));
}
#endif

TEST(Ops, SiluMulMatchesDefinition) {
  const int64_t rows = 3, ff = 16 * 5 + 7;  // vector body and scalar tail
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-30.0f, 30.0f);
  std::vector<float> gu(rows * 2 * ff), out(rows * ff);
  for (auto& x : gu) x = U(rng);
  silu_mul(gu.data(), rows, ff, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < ff; ++i) {
      const double g = gu[r * 2 * ff + i], u = gu[r * 2 * ff + ff + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(out[r * ff + i], ref, 1e-6 * (1.0 + std::abs(ref))) << r << "," << i;
    }
}

TEST(Ops, RopeRotatesEachPairByItsPositionsAngle) {
  const int64_t rows = 4;
  const int n_heads = 3, head_dim = 8, rot_dim = 6, stride = n_heads * head_dim + 5;
  const float base = 10000.0f;
  const std::vector<int32_t> pos = {0, 1, 17, 4095};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<float> x(rows * stride);
  for (auto& v : x) v = U(rng);
  const std::vector<float> before = x;
  std::vector<float> cs(rows * rot_dim);
  rope_angles(pos.data(), rows, rot_dim, base, cs.data());
  rope(x.data(), rows, stride, cs.data(), n_heads, head_dim, rot_dim);
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < head_dim; i += 2) {
        const int64_t at = r * stride + h * head_dim + i;
        double a = before[at], b = before[at + 1];
        if (i < rot_dim) {
          const double th = pos[r] * std::pow(double(base), -double(i) / rot_dim);
          const double ra = a * std::cos(th) - b * std::sin(th), rb = a * std::sin(th) + b * std::cos(th);
          a = ra;
          b = rb;
        }
        ASSERT_NEAR(x[at], a, 1e-6) << "row " << r << " head " << h << " dim " << i;
        ASSERT_NEAR(x[at + 1], b, 1e-6);
      }
  for (int64_t r = 0; r < rows; ++r)  // the columns past the heads are not touched
    for (int64_t c = n_heads * head_dim; c < stride; ++c) ASSERT_EQ(x[r * stride + c], before[r * stride + c]);
}

}  // namespace
}  // namespace kvserve
