// DnnlMatrix (y = x·Wᵀ) against a double-precision product, through both of its paths: the
// small-batch kernel reading oneDNN's packed panels, and oneDNN's own matmul.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "weights/dnnl_matrix.h"

namespace kvserve {
namespace {

struct Shape {
  int64_t n_out, n_in;
};

// Every shape on every kernel level this CPU runs (the small-batch kernel is one per level).
class LinearPaths : public ::testing::TestWithParam<std::tuple<Shape, KernelLevel>> {};

// n values uniform in [-1, 1).
std::vector<float> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = U(rng);
  return v;
}

TEST_P(LinearPaths, BothPathsMatchTheDefinitionAtEveryBatchHeight) {
  const auto [n_out, n_in] = std::get<0>(GetParam());
  ComputeContext ctx(kernel_table(std::get<1>(GetParam())));
  std::mt19937 rng(11);
  const std::vector<float> w = random_values(n_out * n_in, rng);
  DnnlMatrix small(ctx, w.data(), n_out, n_in), onednn(ctx, w.data(), n_out, n_in);
  onednn.disable_small_batch_kernel();
  // F32 decode heights take the small-batch kernel on every CPU (where oneDNN packs in another
  // layout, as its AVX2 GEMM does, from a copy in the kernel's); else this test would check
  // nothing new.
  EXPECT_TRUE(small.uses_small_batch_kernel(1));
  for (int64_t m : std::vector<int64_t>{1, 2, 5, 6, 7, 13, 32, 37, kSmallBatchRows, kSmallBatchRows + 1,
                                        kSmallBatchRows + 18}) {
    const int64_t mp = WeightMatrix::padded_rows(m);  // the rows forward may touch
    const std::vector<float> x = random_values(mp * n_in, rng), base = random_values(mp * n_out, rng);
    for (bool accumulate : {false, true}) {
      std::vector<float> ys = base, yo = base;
      small.forward(x.data(), m, ys.data(), accumulate);
      onednn.forward(x.data(), m, yo.data(), accumulate);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t c = 0; c < n_out; ++c) {
          double ref = accumulate ? base[r * n_out + c] : 0.0;
          for (int64_t i = 0; i < n_in; ++i) ref += double(x[r * n_in + i]) * w[c * n_in + i];
          const double tol = 1e-5 * std::sqrt(double(n_in)) * 4;
          ASSERT_NEAR(ys[r * n_out + c], ref, tol) << "small path m=" << m << " row " << r << " col " << c;
          ASSERT_NEAR(yo[r * n_out + c], ref, tol) << "oneDNN m=" << m << " row " << r << " col " << c;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearPaths,
                         ::testing::Combine(::testing::Values(Shape{64, 16}, Shape{768, 768},
                                                              Shape{100, 40},  // ragged panel and k
                                                              Shape{2304, 768}, Shape{256, 1000}),
                                            ::testing::ValuesIn(supported_levels())),
                         [](const auto& i) {
                           const Shape& s = std::get<0>(i.param);
                           return "n" + std::to_string(s.n_out) + "k" + std::to_string(s.n_in) + "_" +
                                  level_name(std::get<1>(i.param));
                         });

// The batch-composition invariant the engine relies on: a row's result does not depend on which
// other rows share the call, on either path.
TEST(LinearPaths, ARowsResultDoesNotDependOnItsBatch) {
  const int64_t n_out = 512, n_in = 384;
  ComputeContext ctx(kernel_table(best_supported_level()));
  std::mt19937 rng(5);
  const std::vector<float> w = random_values(n_out * n_in, rng);
  DnnlMatrix lin(ctx, w.data(), n_out, n_in);
  const std::vector<float> x = random_values(kSmallBatchRows * n_in, rng);
  std::vector<float> alone(n_out);
  lin.forward(x.data() + 3 * n_in, 1, alone.data());
  for (int64_t m : {int64_t{4}, int64_t{11}, int64_t{40}, kSmallBatchRows}) {
    std::vector<float> y(m * n_out);
    lin.forward(x.data(), m, y.data());
    for (int64_t c = 0; c < n_out; ++c) ASSERT_EQ(y[3 * n_out + c], alone[c]) << "m=" << m << " col " << c;
  }
}

// Above the small-batch range the rows are padded to a few heights; whatever the padding rows
// hold (NaN here) must not reach the real rows, and every height in a bucket shares one primitive.
TEST(LinearPaths, PaddingRowsDoNotReachTheRealOnes) {
  const int64_t n_out = 256, n_in = 128, m = kSmallBatchRows + 8, mp = WeightMatrix::padded_rows(m);
  ASSERT_GT(mp, m);
  ASSERT_EQ(WeightMatrix::padded_rows(mp - 1), mp);
  ComputeContext ctx(kernel_table(best_supported_level()));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  const std::vector<float> w = random_values(n_out * n_in, rng);
  DnnlMatrix lin(ctx, w.data(), n_out, n_in);
  std::vector<float> x(mp * n_in, 0.0f);
  for (int64_t i = 0; i < m * n_in; ++i) x[i] = U(rng);
  std::vector<float> clean(mp * n_out), dirty(mp * n_out, std::nanf(""));
  lin.forward(x.data(), m, clean.data());
  std::fill(x.begin() + m * n_in, x.end(), std::nanf(""));
  lin.forward(x.data(), m, dirty.data());
  for (int64_t i = 0; i < m * n_out; ++i) ASSERT_EQ(clean[i], dirty[i]) << "element " << i;
}

}  // namespace
}  // namespace kvserve
