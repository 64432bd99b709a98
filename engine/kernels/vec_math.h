// Vector math shared by the kernels (AVX-512 and AVX2 levels; callers keep a scalar path for others).
// Included inside a kernel source's level namespace and target region (kernel_level.h), so
// each level's copy is its own; immintrin.h must come first, outside the region.
#if KVSERVE_HAS_AVX512

// e^x for 16 lanes: 2^n · e^r with n = round(x·log2 e) and |r| <= ln2/2, where a degree-6
// polynomial is within about 1 ulp. Scalar std::exp was a visible share of a batched decode
// step in the softmax alone.
static inline __m512 exp16(__m512 x) {
  // (The maskz forms: the plain ones start from _mm512_undefined_ps, which GCC 12 flags as
  // uninitialised wherever they are inlined.)
  const __m512 n = _mm512_maskz_roundscale_ps(0xFFFF, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln2 in two parts
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(0xFFFF, p, n);
}

#elif KVSERVE_HAS_F16C  // the AVX2 levels

// e^x for 8 lanes, as exp16: 2^n built in the exponent bits. Lanes below -87.3 (e^x under
// float's smallest normal, and -inf) give 0.
static inline __m256 exp8(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256 low = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-126.0f))),
                                                       _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(low, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

#endif
