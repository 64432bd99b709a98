// The row kernels of the decoder blocks against double-precision definitions, over inputs that
// reach the vector paths, their scalar tails and the far ends of exp's range: every kernel
// level this CPU runs, each against the same definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernel_table.h"

namespace kvserve {
namespace {

class Ops : public ::testing::TestWithParam<KernelLevel> {
 protected:
  const KernelTable& k = kernel_table(GetParam());
};

TEST_P(Ops, ExpWithinTwoUlpOverTheFloatRange) {
  // Every float in [-87, 88] at a spacing fine enough to cross each reduction interval often.
  double worst = 0;
  for (float x0 = -87.0f; x0 < 88.0f; x0 += 0.0137f * 16) {
    alignas(64) float in[16], out[16];
    for (int i = 0; i < 16; ++i) in[i] = x0 + 0.0137f * i;
    k.exp_array(in, 16, out);
    for (int i = 0; i < 16; ++i) {
      const double ref = std::exp(static_cast<double>(in[i]));
      worst = std::max(worst, std::abs(out[i] - ref) / ref);
    }
  }
  EXPECT_LT(worst, 2.4e-7);  // two float ulps
  alignas(64) float big[16] = {-1000.0f, -104.0f, 89.0f, 1000.0f};
  k.exp_array(big, 16, big);
  EXPECT_EQ(big[0], 0.0f);
  EXPECT_LT(big[1], 1e-44f);
  EXPECT_TRUE(std::isinf(big[2]));
  EXPECT_TRUE(std::isinf(big[3]));
}

TEST_P(Ops, SiluMulMatchesDefinition) {
  const int64_t rows = 3, ff = 16 * 5 + 7;  // vector body and scalar tail
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> U(-30.0f, 30.0f);
  std::vector<float> gu(rows * 2 * ff), out(rows * ff);
  for (auto& x : gu) x = U(rng);
  k.silu_mul(gu.data(), rows, ff, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < ff; ++i) {
      const double g = gu[r * 2 * ff + i], u = gu[r * 2 * ff + ff + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      ASSERT_NEAR(out[r * ff + i], ref, 1e-6 * (1.0 + std::abs(ref))) << r << "," << i;
    }
}

TEST_P(Ops, RmsNormMatchesDefinition) {
  const int64_t rows = 5, dim = 16 * 7 + 3;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> U(-4.0f, 4.0f);
  std::vector<float> x(rows * dim), w(dim), out(rows * dim);
  for (auto& v : x) v = U(rng);
  for (auto& v : w) v = U(rng);
  k.rms_norm(x.data(), w.data(), rows, dim, 1e-5f, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i)
      ASSERT_NEAR(out[r * dim + i], x[r * dim + i] * inv * w[i], 2e-6 * (1 + std::abs(x[r * dim + i] * inv * w[i])));
  }
}

TEST_P(Ops, RopeRotatesEachPairByItsPositionsAngle) {
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
  k.rope_angles(pos.data(), rows, rot_dim, base, 1.0f, nullptr, cs.data());
  k.rope(x.data(), rows, stride, cs.data(), n_heads, head_dim, rot_dim, false);
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

// NEOX order, with Llama 3's per-frequency divisors and a linear scale: (x[i], x[i + rot/2])
// turned by pos · scale · base^(-2i/rot) / f[i].
TEST_P(Ops, NeoxRopeWithFrequencyFactorsRotatesTheHalves) {
  const int64_t rows = 3;
  const int n_heads = 2, head_dim = 12, rot_dim = 8, stride = n_heads * head_dim + 3;
  const float base = 500000.0f, scale = 0.25f;
  const std::vector<int32_t> pos = {0, 9, 3000};
  const std::vector<float> factors = {1.0f, 2.0f, 8.0f, 32.0f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<float> x(rows * stride);
  for (auto& v : x) v = U(rng);
  const std::vector<float> before = x;
  std::vector<float> cs(rows * rot_dim);
  k.rope_angles(pos.data(), rows, rot_dim, base, scale, factors.data(), cs.data());
  k.rope(x.data(), rows, stride, cs.data(), n_heads, head_dim, rot_dim, true);
  for (int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      const int64_t at = r * stride + h * head_dim;
      for (int i = 0; i < rot_dim / 2; ++i) {
        const double th = pos[r] * scale * std::pow(double(base), -2.0 * i / rot_dim) / factors[i];
        const double a = before[at + i], b = before[at + i + rot_dim / 2];
        ASSERT_NEAR(x[at + i], a * std::cos(th) - b * std::sin(th), 1e-6) << r << "," << h << "," << i;
        ASSERT_NEAR(x[at + i + rot_dim / 2], a * std::sin(th) + b * std::cos(th), 1e-6);
      }
      for (int i = rot_dim; i < head_dim; ++i) ASSERT_EQ(x[at + i], before[at + i]);
    }
}

TEST_P(Ops, LayerNormMatchesDefinition) {
  const int64_t rows = 4, dim = 16 * 3 + 5;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> U(-3.0f, 5.0f);
  std::vector<float> x(rows * dim), w(dim), b(dim), out(rows * dim);
  for (auto* v : {&x, &w, &b})
    for (auto& e : *v) e = U(rng);
  k.layer_norm(x.data(), w.data(), b.data(), rows, dim, 1e-5f, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= dim;
    for (int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
    const double inv = 1.0 / std::sqrt(var / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) {
      const double ref = (x[r * dim + i] - mean) * inv * w[i] + b[i];
      ASSERT_NEAR(out[r * dim + i], ref, 1e-5 * (1 + std::abs(ref)));
    }
  }
  k.layer_norm(x.data(), w.data(), b.data(), rows, dim, 1e-5f, x.data());  // in place
  EXPECT_EQ(x, out);
}

// GELU (tanh form) to half precision, as llama.cpp's CPU backend: within one half-precision step
// of the exact function evaluated in double at the half-rounded input, and 0 / x past ±10.
TEST_P(Ops, GeluIsTheTanhFormToHalfPrecision) {
  std::vector<float> x;
  for (float v = -12.0f; v <= 12.0f; v += 0.0173f) x.push_back(v);
  std::vector<float> y(x.size()), gu(2 * x.size()), gm(x.size());
  k.gelu(x.data(), static_cast<int64_t>(x.size()), y.data());
  std::copy(x.begin(), x.end(), gu.begin());
  std::fill(gu.begin() + static_cast<int64_t>(x.size()), gu.end(), 0.5f);
  k.gelu_mul(gu.data(), 1, static_cast<int64_t>(x.size()), gm.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = static_cast<float>(static_cast<_Float16>(x[i]));
    const double exact = 0.5 * h * (1 + std::tanh(std::sqrt(2 / M_PI) * h * (1 + 0.044715 * h * h)));
    if (x[i] <= -10.0f) {
      ASSERT_EQ(y[i], 0.0f);
    } else if (x[i] >= 10.0f) {
      ASSERT_EQ(y[i], x[i]);
    } else {
      ASSERT_NEAR(y[i], exact, std::abs(exact) / 1024 + 1e-7) << x[i];
      ASSERT_EQ(static_cast<float>(static_cast<_Float16>(y[i])), y[i]) << "not a half-precision value";
    }
    ASSERT_EQ(gm[i], y[i] * 0.5f);
  }
}

TEST_P(Ops, BiasAndSoftCap) {
  const int64_t rows = 3, n = 21, stride = 25;
  std::vector<float> x(rows * stride), bias(n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 9.0f;
  for (int64_t i = 0; i < n; ++i) bias[i] = static_cast<float>(i) - 7.0f;
  const std::vector<float> before = x;
  k.add_bias(x.data(), rows, stride, bias.data(), n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      ASSERT_EQ(x[r * stride + c], before[r * stride + c] + (c < n ? bias[c] : 0.0f));
  std::vector<float> v = {-1000.0f, -30.0f, -1.0f, 0.0f, 0.5f, 29.0f, 1e30f};
  const std::vector<float> v0 = v;
  k.soft_cap(v.data(), static_cast<int64_t>(v.size()), 30.0f);
  for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], 30.0 * std::tanh(v0[i] / 30.0), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(EveryLevelThisCpuRuns, Ops, ::testing::ValuesIn(supported_levels()),
                         [](const auto& info) { return std::string(level_name(info.param)); });

TEST(KernelLevels, DetectedAndNamed) {
  EXPECT_EQ(supported_levels().front(), KernelLevel::kScalar);
  EXPECT_EQ(supported_levels().back(), best_supported_level());
  for (KernelLevel l : supported_levels()) {
    EXPECT_EQ(parse_level(level_name(l)), l);
    EXPECT_EQ(kernel_table(l).level, l);
  }
  EXPECT_EQ(parse_level("avx1024"), std::nullopt);
}

}  // namespace
}  // namespace kvserve
